"""A Schemathesis check (loaded by ``SCHEMATHESIS_HOOKS``): every 4xx answer is JSON whose
``detail`` is a sentence naming what is wrong, and, where a request field is at fault, whose
``field`` names it and appears in the detail."""

from __future__ import annotations

import schemathesis


@schemathesis.check
def errors_name_the_field(ctx, response, case) -> bool | None:
    if not 400 <= response.status_code < 500:
        return None
    body = response.json()
    detail = body.get("detail")
    assert isinstance(detail, str) and detail, f"{response.status_code} without a detail: {body}"
    field = body.get("field")
    if response.status_code in (404, 405) and field is None:  # a path or a method, named in the detail
        assert case.path in detail or case.method.upper() in detail, detail
        return True
    assert field, f"{response.status_code} whose body names no field: {body}"
    assert field.split(".")[-1].split("[")[0] in detail, f"detail does not name {field!r}: {detail}"
    return True
