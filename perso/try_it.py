"""The first request ``perso up`` prints: a bash script a newcomer pastes as it stands.

Two commands, as a shop would do it: its backend asks the origin for a user token with its
API key (``POST /v1/auth/token``, ``X-API-Key``), then the browser asks an edge for that
user's recommendations with the token (``Authorization: Bearer``). The token is cut out of
the JSON answer with ``sed``, so the script needs bash, curl and sed only (no jq, no
Python). Over HTTPS with a CA of the stack's own (``PERSO_TLS_CA_FILE``), curl is told to
trust it. ``tests/e2e/test_try_it.py`` runs these very lines against a running stack.
"""

from __future__ import annotations

import shlex
from pathlib import Path

USER_ID = "u-1"
TOKEN_BODY = f'{{"user_id":"{USER_ID}"}}'
PERSONALIZE_BODY = f'{{"user_id":"{USER_ID}","context":{{"page_type":"home","device":"mobile"}}}}'
# The answer is compact JSON ({"token":"...","token_type":"Bearer",...}); a token is
# base64url and dots, never a quote.
TOKEN_FROM_JSON = """sed -E 's/.*"token":"([^"]+)".*/\\1/'"""


def try_it(origin_url: str, edge_url: str, api_key: str, ca_file: Path | None = None) -> list[str]:
    """The lines to print: a comment, then the token request, then the personalize request."""
    curl = "curl -s" + (f" --cacert {shlex.quote(str(ca_file))}" if ca_file else "")
    json_body = "-H 'content-type: application/json' -d"
    token_url = shlex.quote(f"{origin_url}/v1/auth/token")
    token = (
        f"TOKEN=$({curl} {token_url} -H {shlex.quote(f'x-api-key: {api_key}')} "
        f"{json_body} '{TOKEN_BODY}' | {TOKEN_FROM_JSON})"
    )
    # -w: the answer ends with a newline, so the shell's prompt does not follow it.
    personalize = (
        f"{curl} -w '\\n' {shlex.quote(f'{edge_url}/v1/personalize')} "
        f"-H \"authorization: Bearer $TOKEN\" {json_body} '{PERSONALIZE_BODY}'"
    )
    return [
        f"# try it: a token for user {USER_ID} (the stack's API key), then their recommendations",
        token,
        personalize,
    ]
