"""Retrieval for question answering: linked entities -> ranked knowledge-graph facts and paths,
hybrid passage search, merged into one evidence bundle with citation ids and a token budget."""
