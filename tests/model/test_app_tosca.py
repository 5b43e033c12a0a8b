"""Krake's rules for the objects a TOSCA template stands for, checked one by one (parsed in
the confined TOSCA workers, as the API parses them)."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.model import app_tosca

K = app_tosca.KUBERNETES_OBJECT
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\n"
SPEC = "spec.tosca.topology_template.node_templates.a.properties.spec"


def template(nodes: dict[str, Any], **sections: Any) -> dict[str, Any]:
    return {
        "tosca_definitions_version": "tosca_simple_yaml_1_0",
        "imports": [{"ec3_custom_types": app_tosca.EC3_TYPES}],
        "topology_template": {"node_templates": nodes, **sections.pop("topology", {})},
        **sections,
    }


async def objects(tosca: dict[str, Any]) -> list[dict[str, Any]]:
    return await app_tosca.manifest_of(tosca, "spec.tosca")


async def refusal(tosca: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(app_tosca.TemplateRefused) as refused:
        await objects(tosca)
    return refused.value.problems[0]


async def test_text_mappings_functions_and_derived_types_give_objects() -> None:
    derived = {"my.Object": {"derived_from": K, "properties": {"text": {"type": "string"}}}}
    tosca = template(
        {
            "a": {"type": K, "properties": {"spec": CONFIGMAP % "plain"}},
            "b": {"type": K, "properties": {"spec": {"apiVersion": "v1", "kind": "ConfigMap",
                                                     "metadata": {"name": "mapping"}}}},
            "c": {"type": K, "properties": {"spec": {"concat": [
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: joined}\ndata:\n  n:",
                {"get_input": "n"}]}}},
            "d": {"type": "my.Object", "properties": {
                "spec": {"get_property": ["SELF", "text"]}, "text": CONFIGMAP % "derived"}},
        },
        node_types=derived,
        topology={"inputs": {"n": {"type": "integer", "default": 3}}},
    )  # fmt: skip
    found = {obj["metadata"]["name"]: obj for obj in await objects(tosca)}
    assert sorted(found) == ["derived", "joined", "mapping", "plain"]
    assert found["joined"]["data"] == {"n": 3}  # the input's default, after a space


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("", "must not be empty"),
        ("a: [\n", "is not YAML"),
        ("- 1\n- 2\n", "must be one Kubernetes object"),
        ({"concat": ["kind: ConfigMap\nname:", {"get_input": "nope"}]}, "Unknown input"),
    ],
)
async def test_a_node_without_one_object_is_refused_naming_its_spec(
    spec: Any, reason: str
) -> None:
    field, why = await refusal(template({"a": {"type": K, "properties": {"spec": spec}}}))
    assert field == SPEC and reason in why


async def test_nodes_of_other_types_and_imports_not_allowed_are_refused() -> None:
    other = {"my.Other": {"derived_from": "tosca.nodes.Root",
                          "properties": {"spec": {"type": "string"}}}}  # fmt: skip
    tosca = template({"a": {"type": "my.Other", "properties": {"spec": CONFIGMAP % "x"}}},
                     node_types=other)  # fmt: skip
    assert await refusal(tosca) == (
        "spec.tosca.topology_template.node_templates.a.type",
        f"my.Other is not a Kubernetes object: every node must be a {K}",
    )
    elsewhere = template({"a": {"type": K, "properties": {"spec": CONFIGMAP % "x"}}})
    elsewhere["imports"] = [{"x": "https://types.example.org/kubernetes.yaml"}]
    field, why = await refusal(elsewhere)
    assert field == "spec.tosca.imports[0]" and "SHOAL_TOSCA_IMPORTS" in why
    assert await refusal(template({})) == (
        "spec.tosca.topology_template.node_templates",
        "holds no Kubernetes object: nothing to deploy",
    )
