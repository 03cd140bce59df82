"""llama-bench compatibility: its command line as an edgeprof plan, any sweep as its records, its own output
imported as a sweep.

- ``args``: llama-bench's flags, lists and ranges (``parse_bench_args``, ``parse_int_range``);
- ``plan``: a command line as a plan built in code, one workload per llama-bench test (``bench_plan``);
- ``fields``: llama-bench's field list and types, the one list every printer reads;
- ``records``: a stored sweep as llama-bench records (``sweep_records``);
- ``importer``: llama-bench json/jsonl stored as an imported sweep (``import_llama_bench``).

The printers are in ``edgeprof.report.render.llama_bench``.

The names below are the ones callers use; each is imported from its module on first use
(``edgeprof.lazy``), so importing the package alone costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgeprof.lazy import lazy_exports

if TYPE_CHECKING:
    from edgeprof.report.llamabench.args import BenchArgsError, parse_bench_args, parse_int_range
    from edgeprof.report.llamabench.fields import FIELD_NAMES, SAMPLE_FIELDS
    from edgeprof.report.llamabench.importer import LlamaBenchImportError, import_llama_bench, read_records
    from edgeprof.report.llamabench.plan import (
        BENCH_MARK,
        bench_plan,
        name_of_test,
        parse_test_name,
        workload_of_test,
    )
    from edgeprof.report.llamabench.records import stdev_ns, stdev_ts, sweep_records

# module of this package -> the public names it defines, imported on first use
_HOMES: dict[str, tuple[str, ...]] = {
    "args": ("BenchArgsError", "parse_bench_args", "parse_int_range"),
    "fields": ("FIELD_NAMES", "SAMPLE_FIELDS"),
    "importer": ("LlamaBenchImportError", "import_llama_bench", "read_records"),
    "plan": ("BENCH_MARK", "bench_plan", "name_of_test", "parse_test_name", "workload_of_test"),
    "records": ("stdev_ns", "stdev_ts", "sweep_records"),
}

__all__ = [
    "BENCH_MARK",
    "FIELD_NAMES",
    "SAMPLE_FIELDS",
    "BenchArgsError",
    "LlamaBenchImportError",
    "bench_plan",
    "import_llama_bench",
    "name_of_test",
    "parse_bench_args",
    "parse_int_range",
    "parse_test_name",
    "read_records",
    "stdev_ns",
    "stdev_ts",
    "sweep_records",
    "workload_of_test",
]

__getattr__ = lazy_exports(__name__, _HOMES)
