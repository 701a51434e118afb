"""Certification: run the node-side checks, judge them against reference tables, report."""
