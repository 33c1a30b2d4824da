"""Clinician question answering: retrieval, cited answers and conversation sessions."""
