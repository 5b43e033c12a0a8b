"""Who a request is, rule by rule: the token file's lines, the order of the methods, what
is never anonymous, and how long a remote answer is remembered.

The methods themselves (OIDC, Keystone, client certificates) are run against real parts
in ``test_authn.py``; here the Authenticator is handed ASGI scopes directly.
"""

from __future__ import annotations

import os
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from shoal.api.auth.authn import (
    ANONYMOUS,
    ANONYMOUS_USER,
    AUTHENTICATED,
    Authenticator,
    StaticTokens,
    TokenCache,
    Unauthenticated,
    User,
    authenticated,
    parse_tokens,
)
from shoal.api.auth.config import Oidc, Security
from shoal.api.auth.keystone import Keystone
from shoal.api.auth.oidc import OidcIssuer
from tests.security.idp import keystone, oidc_issuer, serve


def test_the_token_files_lines() -> None:
    users = parse_tokens(
        "# token,user,uid,groups\n"
        "t1,alice,uid-1,\"ops,dev\"\n"
        " t2 , bob ,uid-2\n"
        "t3,carol,uid-3,\"\"\n"
        "\n"
        "lonely\n"
        "t4,dave,uid-4,\"ops,,\"\n"
        "t5,erin\n"
    )
    assert users == {
        "t1": User("alice", ("ops", "dev", AUTHENTICATED)),
        "t2": User("bob", (AUTHENTICATED,)),
        "t3": User("carol", (AUTHENTICATED,)),
        "t4": User("dave", ("ops", AUTHENTICATED)),
        "t5": User("erin", (AUTHENTICATED,)),  # token and user: enough
    }
    assert users["t1"].subjects == ("alice", "group:ops", "group:dev",
                                    f"group:{AUTHENTICATED}")  # fmt: skip


def test_the_token_file_is_read_again_when_it_changes_at_most_once_a_second(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text("t1,alice,1\n")
    tokens = StaticTokens(path)
    assert tokens.lookup("t1", 100.0) == authenticated("alice")
    path.write_text("t2,bob,2\n")
    os.utime(path, (1, 1))  # a new modification time
    assert tokens.lookup("t2", 100.5) is None  # checked less than a second ago
    assert tokens.lookup("t1", 100.5) == authenticated("alice")
    assert tokens.lookup("t2", 101.0) == authenticated("bob")  # a second after: read again
    assert tokens.lookup("t1", 101.7) is None
    path.unlink()
    assert tokens.lookup("t2", 103.0) is None  # the file is gone: no token holds


def scope(*headers: tuple[str, str], peer: Any = None) -> MutableMapping[str, Any]:
    found: MutableMapping[str, Any] = {
        "headers": [(k.encode(), v.encode()) for k, v in headers]
    }
    if peer is not None:
        found["shoal.peer"] = peer
    return found


class Checks:
    """A remote check (OIDC, Keystone) that knows one token and counts its calls."""

    def __init__(self, token: str, user: User) -> None:
        self.token, self.user, self.calls = token, user, 0

    async def __call__(self, token: str) -> User | None:
        self.calls += 1
        return self.user if token == self.token else None


def authenticator(tmp_path: Path, **settings: Any) -> tuple[Authenticator, Checks, Checks]:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("static-t,alice,1,ops\n")
    oidc, keystone = Checks("oidc-t", authenticated("olga")), Checks("ks-t", authenticated("kim"))
    security = Security(**{"token_file": tokens, "allow_anonymous": False, **settings})
    return Authenticator(security, [oidc], keystone, lambda: 0.0), oidc, keystone


async def test_who_a_request_is(tmp_path: Path) -> None:
    authn, oidc, keystone = authenticator(tmp_path)
    bearer = "authorization"
    for headers, peer, want in (
        (((bearer, "Bearer static-t"),), None, authenticated("alice", ["ops"])),
        (((bearer, "bearer static-t "),), None, authenticated("alice", ["ops"])),
        (((bearer, "Bearer oidc-t"),), None, authenticated("olga")),
        ((("x-auth-token", "ks-t"),), None, authenticated("kim")),
        # a client certificate first, whatever else is sent
        (((bearer, "Bearer static-t"),), ("dave", ["dev"]), authenticated("dave", ["dev"])),
        # a bearer token wins over Keystone's header
        (((bearer, "Bearer oidc-t"), ("x-auth-token", "ks-t")), None, authenticated("olga")),
    ):
        assert await authn.authenticate(scope(*headers, peer=peer)) == want, headers
    assert keystone.calls == 1
    calls = oidc.calls
    # a static token is never sent to the identity provider
    await authn.authenticate(scope((bearer, "Bearer static-t")))
    assert oidc.calls == calls


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ((("authorization", "Basic eDp5"),), "only Bearer tokens"),
        ((("authorization", "Bearer "),), "only Bearer tokens"),
        ((("authorization", "Bearer nope"),), "bearer token: not recognised"),
        ((("x-auth-token", "nope"),), "X-Auth-Token: not recognised"),
        ((), "no credentials"),
    ],
)
async def test_a_credential_no_method_accepts_is_refused(
    tmp_path: Path, headers: tuple[tuple[str, str], ...], reason: str
) -> None:
    for settings in ({}, {"allow_anonymous": True}):
        authn, _, _ = authenticator(tmp_path, **settings)
        if not headers and settings:
            assert await authn.authenticate(scope()) is ANONYMOUS_USER  # allowed: anonymous
            continue
        with pytest.raises(Unauthenticated, match=reason):  # never anonymous
            await authn.authenticate(scope(*headers))


async def test_krakes_static_user_and_keystone_off(tmp_path: Path) -> None:
    authn = Authenticator(Security(static_user="krake", allow_anonymous=False), [], None,
                          lambda: 0.0)  # fmt: skip
    assert await authn.authenticate(scope()) == authenticated("krake")
    with pytest.raises(Unauthenticated, match="X-Auth-Token"):
        await authn.authenticate(scope(("x-auth-token", "t")))
    with pytest.raises(Unauthenticated, match="not recognised"):
        await authn.authenticate(scope(("authorization", "Bearer t")))
    assert ANONYMOUS_USER.anonymous and ANONYMOUS_USER.name == ANONYMOUS
    assert not authenticated("krake").anonymous


async def test_remote_answers_are_kept_until_the_token_expires() -> None:
    now = [1000.0]
    cache = TokenCache(lambda: now[0], size=4, negative_ttl=10.0)
    answers: dict[str, tuple[User | None, float | None]] = {
        "good": (authenticated("olga"), 1100.0),
        "forever": (authenticated("kim"), None),
        "bad": (None, None),
    }
    calls: list[str] = []

    async def check(token: str) -> tuple[User | None, float | None]:
        calls.append(token)
        return answers[token]

    cached = cache.cached(check)
    for _ in range(3):
        assert await cached("good") == authenticated("olga")
        assert await cached("bad") is None
    assert calls == ["good", "bad"]
    now[0] = 1009.0
    assert await cached("bad") is None and calls == ["good", "bad"]
    now[0] = 1010.0  # a rejection is kept for negative_ttl seconds
    assert await cached("bad") is None and calls == ["good", "bad", "bad"]
    now[0] = 1099.0
    assert await cached("good") == authenticated("olga") and calls.count("good") == 1
    now[0] = 1100.0  # expired: asked again
    assert await cached("good") == authenticated("olga") and calls.count("good") == 2
    # a user without an expiry is kept for negative_ttl seconds too
    assert await cached("forever") == authenticated("kim")
    now[0] = 1110.0
    assert await cached("forever") == authenticated("kim") and calls.count("forever") == 2
    assert cache.get("unknown") == (False, None)
    assert cache.get("bad") == (False, None)  # its rejection expired at 1020
    assert await cached("bad") is None
    assert cache.get("bad") == (True, None)  # remembered again: a rejection


def test_a_full_cache_drops_its_oldest_half() -> None:
    cache = TokenCache(lambda: 0.0, size=4)
    for index in range(4):
        cache.put(f"t{index}", authenticated(f"u{index}"), 100.0)
    cache.put("t4", authenticated("u4"), 100.0)
    assert [cache.get(f"t{i}")[0] for i in range(5)] == [False, False, True, True, True]


async def test_a_keystone_token_names_its_user_roles_and_expiry() -> None:
    """Against a stand-in of Keystone's ``GET /v3/auth/tokens`` (``tests.security.idp``)."""
    async with keystone() as server:
        server.tokens["ks-t"] = "erin"
        before = time.time()
        user, expires = await Keystone(server.url + "/").check("ks-t")
        assert user == authenticated("erin", ["member"])  # its roles become groups
        assert expires is not None and before + 3590 < expires < time.time() + 3610
        assert await Keystone(server.url).check("unknown") == (None, None)
        server.tokens["nameless"] = ""
        assert await Keystone(server.url).check("nameless") == (None, None)
        assert server.checks == 3


async def test_an_oidc_token_is_checked_against_its_issuers_keys() -> None:
    """Against a stand-in issuer (``tests.security.idp``): discovery, its keys, the claims."""
    async with oidc_issuer() as issuer:
        config = Oidc(issuer=issuer.url, audience="shoal", username_claim="sub",
                      groups_claim="groups")  # fmt: skip
        oidc = OidcIssuer(config, fetches=2, window=60.0)
        user, expires = await oidc.check(issuer.token("k1", groups=["ops", "dev"]))
        assert user == authenticated("carol", ["ops", "dev"])
        assert expires is not None and time.time() + 250 < expires < time.time() + 310
        for token in (
            issuer.token("k1", aud="another"),  # not for Shoal
            issuer.token("k1", iss="https://elsewhere"),  # another issuer
            issuer.token("k1", exp=int(time.time()) - 120),  # expired, past the leeway
            issuer.token("k1", sub=""),  # no user
            "not a token",
        ):
            assert await oidc.check(token) == (None, None), token
        assert (await oidc.check(issuer.token("k1", groups="ops")))[0] == authenticated("carol")
        # a token signed by a key the issuer does not publish fetches the keys again, at
        # most `fetches` times a window: guesses cannot flood the issuer
        fetched = issuer.jwks_fetches
        unknown = issuer.token("k1")
        issuer.add_key("k9")
        forged = issuer.token("k9")
        del issuer.keys["k9"]
        for _ in range(5):
            assert await oidc.check(forged) == (None, None)
        assert issuer.jwks_fetches - fetched == 1  # the first already counted: 2 a window
        assert (await oidc.check(unknown))[0] == authenticated("carol")  # known keys still


async def test_an_issuer_whose_discovery_fails_or_names_another_accepts_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A token is only as good as its issuer's discovery document: one that fails, or names
    another issuer, or no keys, lets no token in (and is asked again next time); the log
    says which and why."""
    async with oidc_issuer() as real:
        answers: list[web.Response] = []

        async def discovery(request: web.Request) -> web.Response:
            return answers.pop(0)

        app = web.Application()
        app.router.add_get("/.well-known/openid-configuration", discovery)
        async with serve(app) as url:
            config = Oidc(issuer=url, audience="shoal")
            oidc = OidcIssuer(config, fetches=10, window=60.0)
            keys_at = f"{real.url}/jwks"
            real.url = url  # tokens name this issuer, signed by the real one's key
            token = real.token("k1")
            answers.extend([
                web.json_response({"error": "down"}, status=503),
                web.json_response(["not", "a", "document"]),
                web.json_response({"issuer": "https://elsewhere", "jwks_uri": f"{url}/jwks"}),
                web.json_response({"issuer": url + "/"}),  # no keys named
            ])  # fmt: skip
            with caplog.at_level("WARNING", logger="shoal.api.auth.oidc"):
                for _ in range(4):
                    assert await oidc.check(token) == (None, None)
            assert answers == []  # each failure was asked again
            answers.append(web.json_response({"issuer": url, "jwks_uri": keys_at}))
            assert (await oidc.check(token))[0] == authenticated("carol")  # and now it is up
            discovery_url = f"{url}/.well-known/openid-configuration"
            assert [r.getMessage() for r in caplog.records][:3] == [
                f"OIDC discovery {discovery_url}: status 503",
                f"OIDC discovery {discovery_url}: status 200",
                f"OIDC discovery {discovery_url} names another issuer 'https://elsewhere'",
            ]


KEYSTONE_ANSWERS = [
    pytest.param((200, ["not", "a", "token"]), (None, None), id="200, not an object"),
    pytest.param((401, {"token": {"user": {"name": "erin"}}}), (None, None),
                 id="an error status with a token body"),
    pytest.param((200, {"token": {"user": {"name": "erin"}}}), (authenticated("erin"), None),
                 id="no roles, no expiry: kept as a rejection is"),
    pytest.param((200, {"token": {"user": {"name": "erin"}, "roles": [{"name": "admin"}, "x"],
                                  "expires_at": "2030-01-02T03:04:05Z"}}),
                 (authenticated("erin", ["admin"]), 1893553445.0), id="roles and a Z expiry"),
]  # fmt: skip


@pytest.mark.parametrize(("answer", "want"), KEYSTONE_ANSWERS)
async def test_what_a_keystone_answer_makes_of_a_token(
    answer: tuple[int, Any], want: tuple[User | None, float | None]
) -> None:
    async with keystone() as server:
        server.answer = answer
        user, expires = await Keystone(server.url).check("ks-t")
        assert (user, expires) == want
        assert type(expires) is type(want[1])  # no expiry is None, not another false value


async def test_a_keystone_endpoint_is_used_as_written_but_for_its_trailing_slash() -> None:
    async with keystone("/identityX/v3X") as server:
        server.tokens["ks-t"] = "erin"
        user, _ = await Keystone(server.url + "/").check("ks-t")
        assert user == authenticated("erin", ["member"])


async def test_an_issuer_named_with_a_trailing_slash_in_its_discovery_is_the_same() -> None:
    """Keycloak's issuers are ``…/realms/<realm>``: a realm ending in X keeps its X."""
    async with oidc_issuer("/realms/shopX") as issuer:
        issuer.announced = issuer.url + "/"
        oidc = OidcIssuer(Oidc(issuer=issuer.url, audience="shoal"))
        user, _ = await oidc.check(issuer.token("k1"))
        assert user == authenticated("carol")
        # a token naming it with the trailing slash too
        user, _ = await oidc.check(issuer.token("k1", iss=issuer.url + "/", sub="dan"))
        assert user == authenticated("dan")


async def test_unknown_keys_fetch_the_issuers_keys_five_times_a_window_by_default() -> None:
    async with oidc_issuer() as issuer:
        oidc = OidcIssuer(Oidc(issuer=issuer.url, audience="shoal"))
        issuer.add_key("k9")
        forged = issuer.token("k9")
        del issuer.keys["k9"]
        for _ in range(8):
            assert await oidc.check(forged) == (None, None)
        assert issuer.jwks_fetches == 5


async def test_the_window_of_key_fetches_opens_again_when_its_oldest_fetch_is_window_old() -> None:
    """5 fetches in 10 s by default: a forged key id fetches again only once the oldest of
    the last five is 10 s old."""
    now = [100.0]
    async with oidc_issuer() as issuer:
        oidc = OidcIssuer(Oidc(issuer=issuer.url, audience="shoal"), clock=lambda: now[0])
        issuer.add_key("k9")
        forged = issuer.token("k9")
        del issuer.keys["k9"]
        for at in (100.0, 101.0, 102.0, 103.0, 104.0):
            now[0] = at
            await oidc.check(forged)
        assert issuer.jwks_fetches == 5
        for at, fetched in ((109.9, 5), (110.0, 6), (110.5, 6), (111.0, 7)):
            now[0] = at
            assert await oidc.check(forged) == (None, None)
            assert issuer.jwks_fetches == fetched, at


async def test_keys_the_issuer_fails_to_give_let_no_token_in(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A JWKS answered with an error status, or with something else than an object, or
    without keys: no key, the log says which and why (its keys are not taken from an error
    answer). A key of a type Shoal does not use is passed over, not the keys after it."""
    async with oidc_issuer() as real:
        answers: list[web.Response] = []

        async def discovery(request: web.Request) -> web.Response:
            return web.json_response({"issuer": real.url, "jwks_uri": f"{real.url}/jwks"})

        async def jwks(request: web.Request) -> web.Response:
            return answers.pop(0)

        app = web.Application()
        app.router.add_get("/.well-known/openid-configuration", discovery)
        app.router.add_get("/jwks", jwks)
        async with serve(app) as url:
            real.url = url
            token = real.token("k1")
            keys = [{"kty": "unknown", "kid": "k0"}, *real.jwks()["keys"]]
            answers.extend([web.json_response(real.jwks(), status=503),
                            web.json_response(["not", "keys"]),
                            web.json_response({}),
                            web.json_response({"keys": keys})])  # fmt: skip
            oidc = OidcIssuer(Oidc(issuer=url, audience="shoal"))
            with caplog.at_level("WARNING", logger="shoal.api.auth.oidc"):
                for _ in range(3):
                    assert await oidc.check(token) == (None, None)
                assert (await oidc.check(token))[0] == authenticated("carol")
            assert answers == []
            assert [r.getMessage() for r in caplog.records] == [
                f"OIDC JWKS {url}/jwks: status 503",
                f"OIDC JWKS {url}/jwks: status 200",
            ]


EXPIRED = "Signature has expired"

# (the issuer's configured audience, the token's claims) -> its user, or why it is refused
OIDC_CLAIMS = [
    pytest.param("shoal", {"exp": None}, 'Token is missing the "exp" claim', id="no expiry"),
    pytest.param("shoal", {"exp": -10}, "carol", id="expired 10 s ago: within the leeway"),
    pytest.param("shoal", {"exp": -30}, EXPIRED, id="expired 30 s ago: the leeway's end"),
    pytest.param("shoal", {"exp": -40}, EXPIRED, id="expired 40 s ago: past the leeway"),
    pytest.param(None, {"aud": "shoal"}, "carol", id="no audience configured: any"),
    pytest.param(None, {"aud": None}, "carol", id="no audience configured, none given"),
    pytest.param("shoal", {"aud": None}, 'Token is missing the "aud" claim',
                 id="an audience configured, none given"),
]  # fmt: skip


@pytest.mark.parametrize(("audience", "claims", "outcome"), OIDC_CLAIMS)
async def test_what_an_oidc_tokens_claims_make_of_it(
    caplog: pytest.LogCaptureFixture, audience: str | None, claims: dict[str, Any], outcome: str
) -> None:
    """Who a token is, or why it is refused: the log says so, naming the issuer."""
    async with oidc_issuer() as issuer:
        if claims.get("exp") is not None:
            claims = {**claims, "exp": int(time.time()) + claims["exp"]}
        oidc = OidcIssuer(Oidc(issuer=issuer.url, audience=audience))
        with caplog.at_level("INFO", logger="shoal.api.auth.oidc"):
            found, _ = await oidc.check(issuer.token("k1", **claims))
        said = [r.getMessage() for r in caplog.records if r.name == "shoal.api.auth.oidc"]
        if " " in outcome:  # a reason
            assert found is None
            assert said == [f"OIDC token of {issuer.url} refused: {outcome}"]
        else:
            assert found == authenticated(outcome)
            assert said == []
