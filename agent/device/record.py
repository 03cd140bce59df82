"""The stored row of the device a sweep runs on: one per fingerprint of its facts."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from edgeprof.device.facts import device_fingerprint
from edgeprof.run_states import utcnow

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from edgeprof.storage.models import Device


def get_or_create_device(session: Session, facts: dict[str, Any]) -> Device:
    # Storage is imported here, not at the top: edgeprof.device is imported for its facts by plan
    # validation and doctor, which must not pay for SQLAlchemy.
    from sqlalchemy import select

    from edgeprof.storage.identity import add_unique
    from edgeprof.storage.models import Device

    fp = device_fingerprint(facts)
    device = session.scalar(select(Device).where(Device.fingerprint == fp))
    if device is None:
        device = Device(
            fingerprint=fp,
            hostname=str(facts.get("hostname") or ""),
            machine_id=facts.get("machine_id"),
            arch=str(facts.get("arch") or ""),
            cpu_model=facts.get("cpu_model"),
            cpu_count=facts.get("cpu_count"),
            ram_total_mb=facts.get("ram_total_mb"),
            board_model=facts.get("board_model"),
            l4t_release=facts.get("l4t_release"),
            gpu=facts.get("gpu"),
            kernel=facts.get("kernel"),
            os_release=facts.get("os_release"),
            facts_json=json.dumps(facts, sort_keys=True),
            first_seen=utcnow(),
        )
        device = add_unique(session, device, fingerprint=fp)
    return device
