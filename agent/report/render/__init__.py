"""Every output format of the report, one module each, registered by name in ``formats.RENDERERS``.

The row formats (``table``, ``md``, ``csv``, ``json``) print the rows of ``build_rows``; ``html`` draws a
whole page from the database, and llama-bench's formats are in ``edgeprof.report.render.llama_bench``.
Callers import from the module that defines a name (``edgeprof.report`` re-exports the common ones), so
printing a table never loads the HTML page's code.
"""
