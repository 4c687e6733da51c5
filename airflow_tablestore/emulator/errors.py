"""The error every emulator handler raises to answer a request with a Tablestore error."""

from __future__ import annotations


class EmulatorError(Exception):
    """Answered as HTTP ``status`` with an ``Error{code, message}`` protobuf body."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


def parameter_invalid(message: str) -> EmulatorError:
    return EmulatorError("OTSParameterInvalid", message, 400)


def table_not_found() -> EmulatorError:
    return EmulatorError("OTSObjectNotExist", "Requested table does not exist.", 404)
