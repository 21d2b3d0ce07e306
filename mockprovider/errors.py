"""OpenAI-shaped error bodies: `{"error": {"message", "type", "param", "code"}}`."""

from __future__ import annotations

from starlette.responses import JSONResponse


class APIError(Exception):
    """Raised anywhere in request handling; rendered as an OpenAI-shaped error response."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


class ScriptedError(APIError):
    """An error a scenario answers with: its `type`, when the script gave one, is sent as it is
    in every wire format (otherwise each format derives one from the status)."""

    def __init__(self, status: int, message: str, *, type: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        derived = "invalid_request_error" if status < 500 else "server_error"
        super().__init__(status, message, type=type or derived, code=code, headers=headers)
        self.given_type = type is not None


def invalid(message: str, *, param: str | None = None, code: str | None = None) -> APIError:
    """400: the request itself is wrong."""
    return APIError(400, message, param=param, code=code)


def missing(param: str) -> APIError:
    """400: a required parameter is absent."""
    return invalid(f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")


class ClientGone(Exception):
    """The client disconnected before its body arrived or while its request waited: nothing
    more is done for it."""
