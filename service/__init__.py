"""The service layer: composition root, CLI, and (in later issues) the FastAPI app and QA orchestration."""
