"""The ``kind = "task"`` workload: task accuracy (HellaSwag, Winogrande, multiple choice) per variant."""

from edgeprof.plan.tasks.spec import (
    DEFAULT_TASKS,
    MAX_TASK_FILE_BYTES,
    TASK_KEYS,
    TaskSpec,
    is_task,
    parse_task,
    task_params,
)

__all__ = [
    "DEFAULT_TASKS",
    "MAX_TASK_FILE_BYTES",
    "TASK_KEYS",
    "TaskSpec",
    "is_task",
    "parse_task",
    "task_params",
]
