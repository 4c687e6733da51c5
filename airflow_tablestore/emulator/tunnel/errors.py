"""The tunnel service's typed errors (Tablestore codes, HTTP statuses, actionable messages)."""

from __future__ import annotations

from airflow_tablestore.emulator.errors import EmulatorError, parameter_invalid


def tunnel_not_exist() -> EmulatorError:
    return parameter_invalid("tunnel not exist")


def resource_gone(message: str) -> EmulatorError:
    return EmulatorError("OTSResourceGone", message, 410)


def tunnel_expired() -> EmulatorError:
    return EmulatorError(
        "OTSTunnelExpired",
        "tunnel expired: its stream position is older than the retained stream log; delete and recreate it",
        400,
    )


def sequence_mismatch(stored: int, got: int) -> EmulatorError:
    return EmulatorError(
        "OTSSequenceNumberNotMatch",
        f"sequence number {got} is not greater than the stored {stored}; re-read GetCheckpoint",
        400,
    )
