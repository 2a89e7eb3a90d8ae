"""Reproductions of the seeds' papers: a paper file as data (paper_file), each paper figure beside
ours (paper_figures), a verdict per claim by the rule the paper file writes (verdicts), the section
they make (section), its tables and HTML (paper_section) and the Markdown page of
docs/reproductions/ (page). Depends on analysis/ and reports/; nothing there depends on it."""
