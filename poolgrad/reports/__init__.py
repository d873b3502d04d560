"""poolgrad's results and reports: the ``poolgrad-results/1`` JSON-lines format
(schema, records), merge and diff of results sets, and the HTML / Markdown reports.

    python -m poolgrad.reports --help

The pytest plugin writes records with ``reports.records.write_record`` and the reports with
``reports.html.write_html`` and ``reports.markdown.write_markdown``.
"""
