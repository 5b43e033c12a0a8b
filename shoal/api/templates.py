"""An application given as a TOSCA template or a CSAR archive gets its manifest at admission.

Krake's rule picks the form: a non-empty ``spec.manifest`` is the application;
else ``spec.tosca`` (a template, or the URL of one); else ``spec.csar`` (the URL
of an archive). Krake's clients clear the manifest when they send a template
(``rok kube app update --file tosca.yaml``) and keep it otherwise, so a write
that changes only labels does not read the template again.

The API translates, not a controller, so that:

- what is wrong with a template is the writer's 422 naming the field, at once;
- the stored application always has the manifest that is deployed, which
  Krake's clients read back (``spec.manifest``) and which Krake's own kube
  controller, run against Shoal, then finds filled and leaves alone;
- the same template sent again gives the same manifest: an update that changes
  nothing is seen as such.

A URL is a tenant's: it must start with a prefix ``SHOAL_TOSCA_URLS`` allows, and
it is read under the outbound policy (``shoal.machinery.outbound``). What is read
is parsed in the confined TOSCA workers (``shoal.model.app_tosca``).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import yaml

from shoal.machinery import outbound
from shoal.machinery.problems import invalid_error
from shoal.model import app_tosca, tosca


async def translate(obj: Any) -> None:
    """Fill an application's empty ``spec.manifest`` from its template or archive, or
    refuse it with a 422 naming the field."""
    if (obj.api, obj.kind) != ("kubernetes", "Application"):
        return
    spec = obj.spec
    if spec.manifest:
        return
    try:
        if spec.tosca:
            field = "spec.tosca"
            template = spec.tosca
            if isinstance(template, str):
                template = await _read_template(template)
        elif spec.csar:
            field = "spec.csar"
            archive = await _read(field, spec.csar, app_tosca.CSAR_LIMIT, (".csar", ".zip"))
            template = await app_tosca.template_of_csar(archive, field)
        else:
            return  # the manifest's own rule says it is required
        spec.manifest = await app_tosca.manifest_of(template, field)
    except app_tosca.TemplateRefused as refused:
        raise invalid_error([{"field": f, "reason": r} for f, r in refused.problems]) from None


async def _read_template(url: str) -> Any:
    field = "spec.tosca"
    text = (await _read(field, url, app_tosca.TEMPLATE_LIMIT, (".yaml", ".yml"))).decode(
        errors="replace"
    )
    try:
        # bounded (no aliases, no deep nesting), and off the event loop
        return await asyncio.to_thread(tosca.load_yaml, text)
    except yaml.YAMLError as error:  # which names the line
        raise app_tosca.TemplateRefused([(field, f"{url} is not YAML: {error}"[:1000])]) from None


async def _read(field: str, url: str, limit: int, suffixes: tuple[str, ...]) -> bytes:
    """The document at ``url`` (the value of ``field``), if it may be read."""
    if not re.match(r"^https?://", url) or not url.endswith(suffixes):
        raise app_tosca.TemplateRefused([(field, "must be an http(s) URL ending in "
                                          f"{' or '.join(suffixes)}")])  # fmt: skip
    if not tosca.allowed_url(url):
        raise app_tosca.TemplateRefused([(field, "reading templates from URLs is not allowed "
                                          f"here (set {tosca.URLS_SETTING})")])  # fmt: skip
    try:
        return await outbound.fetch(url, limit)
    except outbound.FetchFailed as error:
        raise app_tosca.TemplateRefused([(field, str(error))]) from None
