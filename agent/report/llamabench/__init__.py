"""llama-bench compatibility: its command line as an edgeprof plan, any sweep as its records, its own output
imported as a sweep.

- ``args``: llama-bench's flags, lists and ranges (``parse_bench_args``, ``parse_int_range``);
- ``plan``: a command line as a plan built in code, one workload per llama-bench test (``bench_plan``);
- ``fields``: llama-bench's field list and types, the one list every printer reads;
- ``records``: a stored sweep as llama-bench records (``sweep_records``);
- ``importer``: llama-bench json/jsonl stored as an imported sweep (``import_llama_bench``).

The printers are in ``edgeprof.report.render.llama_bench``.
"""

from edgeprof.report.llamabench.args import (
    OUTPUT_FORMATS,
    BenchArgs,
    BenchArgsError,
    parse_bench_args,
    parse_int_range,
)
from edgeprof.report.llamabench.fields import (
    FIELD_NAMES,
    FIELD_TYPES,
    FIELDS,
    LLAMA_BENCH_DEFAULTS,
    SAMPLE_FIELDS,
)
from edgeprof.report.llamabench.importer import (
    ImportResult,
    LlamaBenchImportError,
    import_llama_bench,
    read_records,
)
from edgeprof.report.llamabench.plan import (
    BENCH_MARK,
    bench_plan,
    name_of_test,
    parse_test_name,
    workload_of_test,
)
from edgeprof.report.llamabench.records import model_type, stdev_ns, stdev_ts, sweep_records

__all__ = [
    "BENCH_MARK",
    "FIELDS",
    "FIELD_NAMES",
    "FIELD_TYPES",
    "LLAMA_BENCH_DEFAULTS",
    "OUTPUT_FORMATS",
    "SAMPLE_FIELDS",
    "BenchArgs",
    "BenchArgsError",
    "ImportResult",
    "LlamaBenchImportError",
    "bench_plan",
    "import_llama_bench",
    "model_type",
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
