"""Request signing for the Tablestore table API and Tunnel Service (V2 HMAC-SHA1 and V4 HMAC-SHA256).

Every request is ``POST <endpoint>/<ApiName>`` (or ``/tunnel/<op>``) carrying ``x-ots-*`` headers. The
canonical string covers only the API path (never an endpoint path prefix) and every ``x-ots-*`` header
except the signature headers, sorted by lower-cased name::

    "<api path>\\nPOST\\n\\n" + "".join(f"{name}:{value.strip()}\\n" for sorted headers)

V2 signs it with HMAC-SHA1 keyed by the AccessKey secret (``x-ots-signature``). V4 (used when a region is
given) adds the signed ``x-ots-signdate``/``x-ots-signregion`` headers, appends ``"ots"`` to the canonical
string and signs with HMAC-SHA256 keyed by the *base64 text* of a derived key (``x-ots-signaturev4``).

Secrets never leave this module except as HMAC keys: :class:`Credentials` masks them in ``repr``/``str``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
from collections.abc import Mapping
from datetime import UTC, datetime

API_VERSION = "2015-12-31"
EMPTY_BODY_MD5 = "1B2M2Y8AsgTpgAmY7PhCfg=="

H_DATE = "x-ots-date"
H_API_VERSION = "x-ots-apiversion"
H_ACCESS_KEY_ID = "x-ots-accesskeyid"
H_INSTANCE = "x-ots-instancename"
H_CONTENT_MD5 = "x-ots-contentmd5"
H_STS_TOKEN = "x-ots-ststoken"
H_SIGNATURE = "x-ots-signature"
H_SIGNATURE_V4 = "x-ots-signaturev4"
H_SIGN_DATE = "x-ots-signdate"
H_SIGN_REGION = "x-ots-signregion"
H_REQUEST_ID = "x-ots-requestid"

_SIGNATURE_HEADERS = frozenset({H_SIGNATURE, H_SIGNATURE_V4})
_MASK = "******"


class Credentials:
    """AccessKey pair, optional STS token and optional region (a region switches signing to V4).

    ``repr``/``str`` never show the secret or the token.
    """

    __slots__ = ("_secret", "_sts_token", "_v4_cache", "_v4_lock", "access_key_id", "region")

    def __init__(
        self,
        access_key_id: str,
        access_key_secret: str,
        sts_token: str | None = None,
        region: str | None = None,
    ) -> None:
        if not access_key_id or not isinstance(access_key_id, str):
            raise ValueError("access_key_id must be a non-empty string")
        if not access_key_secret or not isinstance(access_key_secret, str):
            raise ValueError("access_key_secret must be a non-empty string")
        self.access_key_id = access_key_id
        self._secret = access_key_secret
        self._sts_token = sts_token or None
        self.region = region or None
        self._v4_cache: tuple[str, str] | None = None  # (sign date, derived key)
        self._v4_lock = threading.Lock()

    @property
    def access_key_secret(self) -> str:
        """The secret itself (needed for signing; never log it)."""
        return self._secret

    @property
    def sts_token(self) -> str | None:
        return self._sts_token

    @property
    def uses_v4(self) -> bool:
        return self.region is not None

    def v4_key(self, sign_date: str) -> str:
        """The V4 signing key text for ``sign_date`` (``YYYYMMDD``), cached per day."""
        assert self.region is not None
        with self._v4_lock:
            cached = self._v4_cache
            if cached is not None and cached[0] == sign_date:
                return cached[1]
            key = derive_v4_key(self._secret, sign_date, self.region)
            self._v4_cache = (sign_date, key)
            return key

    def __repr__(self) -> str:
        token = _MASK if self._sts_token else None
        return (
            f"Credentials(access_key_id={self.access_key_id!r}, access_key_secret={_MASK!r}, "
            f"sts_token={token!r}, region={self.region!r})"
        )

    __str__ = __repr__

    def __reduce__(self) -> tuple[type[Credentials], tuple[str, str, str | None, str | None]]:
        # Picklable for Spark executors (the secret travels, as it must, but never in text form).
        return (Credentials, (self.access_key_id, self._secret, self._sts_token, self.region))


# ---- primitives -----------------------------------------------------------------------------------


def content_md5(body: bytes) -> str:
    """``base64(md5(body))`` as sent in ``x-ots-contentmd5``."""
    return base64.b64encode(hashlib.md5(body).digest()).decode("ascii")


def format_date(moment: datetime | None = None) -> str:
    """UTC ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (always three fractional digits)."""
    moment = (moment or datetime.now(UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def canonical_string(uri: str, headers: Mapping[str, str]) -> str:
    """The V2 string to sign: API path, method, empty query, then sorted ``x-ots-*`` headers."""
    lines = sorted(
        f"{name.lower()}:{value.strip()}"
        for name, value in headers.items()
        if name.lower().startswith("x-ots-") and name.lower() not in _SIGNATURE_HEADERS
    )
    return uri + "\nPOST\n\n" + "".join(line + "\n" for line in lines)


def _hmac_b64(key: bytes, message: str, digest: str) -> str:
    return base64.b64encode(hmac.new(key, message.encode("utf-8"), digest).digest()).decode("ascii")


def sign_v2(secret: str, uri: str, headers: Mapping[str, str]) -> str:
    """``x-ots-signature``: base64 HMAC-SHA1 of the canonical string keyed by the AccessKey secret."""
    return _hmac_b64(secret.encode("utf-8"), canonical_string(uri, headers), "sha1")


def derive_v4_key(secret: str, sign_date: str, region: str) -> str:
    """The V4 signing key: base64 of the HMAC-SHA256 chain over date, region, ``ots``,
    ``aliyun_v4_request``."""
    key = ("aliyun_v4" + secret).encode("utf-8")
    for part in (sign_date, region, "ots", "aliyun_v4_request"):
        key = hmac.new(key, part.encode("utf-8"), "sha256").digest()
    return base64.b64encode(key).decode("ascii")


def sign_v4(v4_key: str, uri: str, headers: Mapping[str, str]) -> str:
    """``x-ots-signaturev4``: base64 HMAC-SHA256 of ``canonical + "ots"`` keyed by the V4 key text."""
    return _hmac_b64(v4_key.encode("utf-8"), canonical_string(uri, headers) + "ots", "sha256")


def response_signature(key: str, uri: str, headers: Mapping[str, str]) -> str:
    """Signature the service puts in ``Authorization: OTS <akid>:<sig>`` of a response.

    ``key`` is the AccessKey secret for V2 requests and the V4 key text for V4 requests.
    """
    lines = sorted(
        f"{name.lower()}:{value.strip()}" for name, value in headers.items()
        if name.lower().startswith("x-ots-")
    )
    return _hmac_b64(key.encode("utf-8"), "\n".join(lines) + "\n" + uri, "sha1")


# ---- full request headers -------------------------------------------------------------------------


def build_headers(
    credentials: Credentials,
    instance_name: str,
    uri: str,
    body: bytes,
    *,
    api_version: str = API_VERSION,
    now: datetime | None = None,
) -> dict[str, str]:
    """All ``x-ots-*`` headers of one request to ``uri`` (``/<ApiName>`` or ``/tunnel/<op>``), signed."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    headers = {
        H_DATE: format_date(moment),
        H_API_VERSION: api_version,
        H_ACCESS_KEY_ID: credentials.access_key_id,
        H_INSTANCE: instance_name,
        H_CONTENT_MD5: content_md5(body),
    }
    if credentials.sts_token:
        headers[H_STS_TOKEN] = credentials.sts_token
    if credentials.region is not None:
        sign_date = moment.strftime("%Y%m%d")
        headers[H_SIGN_DATE] = sign_date
        headers[H_SIGN_REGION] = credentials.region
        headers[H_SIGNATURE_V4] = sign_v4(credentials.v4_key(sign_date), uri, headers)
    else:
        headers[H_SIGNATURE] = sign_v2(credentials.access_key_secret, uri, headers)
    return headers


def response_signing_key(credentials: Credentials, request_headers: Mapping[str, str]) -> str:
    """The key that signs responses to a request sent with ``request_headers``."""
    sign_date = request_headers.get(H_SIGN_DATE)
    if credentials.region is not None and sign_date:
        return credentials.v4_key(sign_date)
    return credentials.access_key_secret
