"""PubMed and MEDLINE records: readers for every format NCBI ships, and their path into the graph."""
