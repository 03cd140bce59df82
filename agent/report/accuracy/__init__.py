"""Task accuracy in the report: each variant's accuracy, its loss against the reference on the same tasks,
and correct answers per kJ (the fields, the table cell, the summary lines and the compare line)."""

from edgeprof.report.accuracy.attach import (
    COMPARE_TASK_FIELDS,
    TASK_FIELDS,
    accuracy_exclusion,
    accuracy_lines,
    attach_tasks,
    compare_accuracy,
    compare_lines,
    fmt_accuracy,
    paired_counts,
    task_items_of,
)

__all__ = [
    "COMPARE_TASK_FIELDS",
    "TASK_FIELDS",
    "accuracy_exclusion",
    "accuracy_lines",
    "attach_tasks",
    "compare_accuracy",
    "compare_lines",
    "fmt_accuracy",
    "paired_counts",
    "task_items_of",
]
