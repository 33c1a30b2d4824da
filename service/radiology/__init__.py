"""Radiology report generation: similar prior studies and reports plus KG facts about the indication."""
