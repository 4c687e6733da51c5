"""Request verification (V2/V4 signature, AccessKey ID, instance, body MD5, date skew), response signing."""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import hmac
import re
from collections.abc import Mapping

from airflow_tablestore.emulator.errors import EmulatorError

EMPTY_MD5 = "1B2M2Y8AsgTpgAmY7PhCfg=="
MAX_SKEW_S = 15 * 60
_SIG_HEADERS = ("x-ots-signature", "x-ots-signaturev4")
_REQUIRED = ("x-ots-date", "x-ots-apiversion", "x-ots-accesskeyid", "x-ots-instancename", "x-ots-contentmd5")
# At most 9 fraction digits (ns): a longer fraction is malformed, not a number to convert digit by digit.
_DATE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{0,9}))?Z$")


def content_md5(body: bytes) -> str:
    """``base64(md5(body))`` as sent in ``x-ots-contentmd5``."""
    return base64.b64encode(hashlib.md5(body).digest()).decode("ascii")


def canonical_request(uri: str, headers: Mapping[str, str]) -> str:
    """The V2 string to sign from all ``x-ots-*`` headers (names lower-case) except the signatures."""
    items = sorted(
        (k, v.strip()) for k, v in headers.items() if k.startswith("x-ots-") and k not in _SIG_HEADERS
    )
    return uri + "\nPOST\n\n" + "".join(f"{k}:{v}\n" for k, v in items)


def sign_v2(secret: str, uri: str, headers: Mapping[str, str]) -> str:
    digest = hmac.new(secret.encode(), canonical_request(uri, headers).encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def v4_key(secret: str, date: str, region: str) -> str:
    """The V4 signing key text: base64 of the HMAC-SHA256 chain."""
    k = hmac.new(("aliyun_v4" + secret).encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, "ots", "aliyun_v4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return base64.b64encode(k).decode("ascii")


def sign_v4(key: str, uri: str, headers: Mapping[str, str]) -> str:
    msg = (canonical_request(uri, headers) + "ots").encode()
    return base64.b64encode(hmac.new(key.encode(), msg, hashlib.sha256).digest()).decode("ascii")


def sign_response(key: str, uri: str, headers: Mapping[str, str]) -> str:
    """Signature of the ``Authorization`` response header (HMAC-SHA1 over x-ots-* headers + URI)."""
    items = sorted((k.lower(), v.strip()) for k, v in headers.items() if k.lower().startswith("x-ots-"))
    msg = "".join(f"{k}:{v}\n" for k, v in items) + uri
    return base64.b64encode(hmac.new(key.encode(), msg.encode(), hashlib.sha1).digest()).decode("ascii")


def parse_date(text: str) -> float | None:
    """Parse ``YYYY-MM-DDTHH:MM:SS[.fraction]Z`` leniently into epoch seconds; None if malformed."""
    m = _DATE_RE.match(text.strip())
    if not m:
        return None
    try:
        y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
        dt = _dt.datetime(y, mo, d, h, mi, s, tzinfo=_dt.UTC)
    except ValueError:
        return None
    frac = m.group(7) or ""
    return dt.timestamp() + (int(frac) / 10 ** len(frac) if frac else 0.0)


def format_date(epoch_s: float) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    dt = _dt.datetime.fromtimestamp(epoch_s, _dt.UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _same_signature(expected: str, given: str) -> bool:
    """Constant-time comparison that tolerates any header text (http.server decodes headers as latin-1;
    ``hmac.compare_digest`` refuses non-ASCII ``str``)."""
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "surrogateescape"))


def _shown(text: str, limit: int = 64) -> str:
    """A header value as it may appear in an error message (bounded)."""
    return text if len(text) <= limit else text[:limit] + "..."


def response_key(headers: Mapping[str, str], access_key_secret: str) -> str:
    """The key that signs the response to a request: the derived V4 key for V4 requests, else the secret."""
    date, region = headers.get("x-ots-signdate"), headers.get("x-ots-signregion")
    if headers.get("x-ots-signaturev4") and date and region:
        return v4_key(access_key_secret, date, region)
    return access_key_secret


def auth_failed(message: str) -> EmulatorError:
    return EmulatorError("OTSAuthFailed", message, 403)


def verify_request(
    uri: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    access_key_id: str,
    access_key_secret: str,
    instance: str,
    now_s: float,
    verify_signature: bool = True,
) -> str:
    """Check a request; return the key that signs the response. ``headers`` must have lower-case names.

    Raises :class:`EmulatorError`: 400 ``OTSParameterInvalid`` for a missing header or bad date, 403
    ``OTSAuthFailed`` for a wrong AccessKey ID, instance, MD5, date skew or signature.
    """
    if not verify_signature:
        return access_key_secret
    for name in _REQUIRED:
        if not headers.get(name):
            raise EmulatorError("OTSParameterInvalid", f"Missing header: {name}.", 400)
    v4 = headers.get("x-ots-signaturev4")
    v2 = headers.get("x-ots-signature")
    if not v4 and not v2:
        raise EmulatorError("OTSParameterInvalid", "Missing header: x-ots-signature.", 400)
    if headers["x-ots-accesskeyid"] != access_key_id:
        raise auth_failed("The AccessKeyID does not exist.")
    if headers["x-ots-instancename"] != instance:
        raise auth_failed(f"The instance is not found: {_shown(headers['x-ots-instancename'])}.")
    if headers["x-ots-contentmd5"] != content_md5(body):
        raise auth_failed("Mismatch between MD5 value of request body and x-ots-contentmd5 in header.")
    date_text = headers["x-ots-date"]
    when = parse_date(date_text)
    if when is None:
        raise EmulatorError("OTSParameterInvalid", f"Invalid date format: {_shown(date_text)}.", 400)
    if abs(when - now_s) > MAX_SKEW_S:
        raise auth_failed(f"Mismatch between system time and x-ots-date: {_shown(date_text)}.")
    if v4:
        date = headers.get("x-ots-signdate", "")
        region = headers.get("x-ots-signregion", "")
        if not date or not region:
            raise EmulatorError("OTSParameterInvalid", "Missing header: x-ots-signdate/x-ots-signregion.",
                                400)
        key = v4_key(access_key_secret, date, region)
        if not _same_signature(sign_v4(key, uri, headers), v4):
            raise auth_failed("Signature mismatch.")
        return key
    assert v2 is not None
    if not _same_signature(sign_v2(access_key_secret, uri, headers), v2):
        raise auth_failed("Signature mismatch.")
    return access_key_secret
