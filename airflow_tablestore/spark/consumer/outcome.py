"""What a consumer run reports: its summary, and its failures (error types, messages for the log)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_tablestore.client.errors import TunnelExpiredError


class JobError(RuntimeError):
    """A failure the job reports with an actionable message and a non-zero exit code."""


class ConfigurationError(JobError):
    """A mistake in how the job is set up (exit code 3): running it again unchanged cannot succeed."""


@dataclass
class JobSummary:
    """What a run did (logged as one JSON line at the end)."""

    phase: str
    table: str
    tunnel: str
    skipped: bool = False
    rounds: int = 0
    records: int = 0
    bytes: int = 0
    channels_finished: int = 0
    refused: int = 0
    peak_task_rss_bytes: int = 0
    seconds: float = 0.0
    consume_point: str | None = None
    cutoff: str | None = None
    profile: dict[str, float] = field(default_factory=dict)

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["records_per_second"] = round(self.records_per_second, 1)
        out["seconds"] = round(self.seconds, 3)
        out["profile"] = {k: round(v, 3) for k, v in self.profile.items()}
        return out


RESOURCE_GONE_CODE = "OTSResourceGone"


def is_wrapped_resource_gone(exc: BaseException) -> bool:
    """True for an exception (of any type: Spark wraps executor errors) whose text carries a 410
    ``OTSResourceGone`` from the tunnel service: the channel or client was taken over or timed out."""
    return RESOURCE_GONE_CODE in str(exc)[-20000:]


def resource_gone_line(exc: BaseException) -> str:
    """The line of a wrapped error that names the ``OTSResourceGone`` (for the log), at most 300 characters."""
    text = str(exc)[-20000:]
    line = next((ln.strip() for ln in text.splitlines() if RESOURCE_GONE_CODE in ln), RESOURCE_GONE_CODE)
    return line[:300]


def expired_message(exc: TunnelExpiredError) -> str:
    """The actionable message for an expired tunnel."""
    return (f"tunnel expired ({exc}): its stream data fell out of retention; delete and recreate the tunnel "
            "and run the full phase again")
