"""Conversation sessions: a follow-up question in a session is expanded with its remembered entities."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path

from service.api.deps import get_container
from service.container import Container
from service.qa.sessions import SESSION_ID_RE, Session

router = APIRouter(prefix="/v1", tags=["qa"])
Deps = Annotated[Container, Depends(get_container)]


@router.post(
    "/sessions",
    response_model=Session,
    status_code=201,
    responses={
        201: {
            "description": "The new session.",
            "links": {  # what a client (and schemathesis's stateful phase) does next with it
                "GetSession": {
                    "operationId": "get_session_v1_sessions__session_id__get",
                    "parameters": {"session_id": "$response.body#/id"},
                }
            },
        }
    },
)
def create_session(c: Deps) -> Session:
    """A new session; pass its ``id`` as ``session_id`` to ``POST /v1/qa``. It expires after
    MEDKG_SESSION_TTL_S without a turn."""
    return c.sessions.create()


@router.get(
    "/sessions/{session_id}", response_model=Session, responses={404: {"description": "Unknown or expired session."}}
)
def get_session(c: Deps, session_id: Annotated[str, Path(pattern=SESSION_ID_RE.pattern)]) -> Session:
    """Recent turns, the running summary and the memory items with their current weights."""
    found = c.sessions.get(session_id)
    if found is None:
        raise HTTPException(404, f"no session {session_id!r} (unknown or expired)")
    return found
