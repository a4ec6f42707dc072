"""docker-compose.yml read as a deployer reads it, with the variables of a ``.env`` (README, "Deploy with docker
compose"). Docker is not needed: the file is YAML, and Compose's interpolation (``${VAR:-default}``,
``${VAR:?error}``, nested) is small enough to apply here as its reference describes it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings

COMPOSE_FILE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


class Refused(Exception):
    """What Compose stops with: a required variable without a value."""


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}``, the default or error itself interpolated."""
    out, at = [], 0
    while (start := text.find("${", at)) != -1:
        out.append(text[at:start])
        depth, end = 1, start + 2
        while depth:
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        body = text[start + 2:end - 1]
        name, operator, rest = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:-|:\?)(.*))?", body, re.DOTALL).groups()
        value = env.get(name, "")
        if not value and operator == ":-":
            value = interpolate(rest, env)
        elif not value and operator == ":?":
            raise Refused(interpolate(rest, env))
        out.append(value)
        at = end
    return "".join(out) + text[at:]


def compose(env: dict[str, str]) -> dict[str, Any]:
    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: walk(value) for key, value in node.items()}
        if isinstance(node, list):
            return [walk(value) for value in node]
        return interpolate(node, env) if isinstance(node, str) else node
    return walk(yaml.safe_load(COMPOSE_FILE.read_text()))


def seconds(duration: str) -> float:
    """A Compose (Go) duration such as ``20s``, ``1m30s`` or ``10s10s`` in seconds."""
    assert re.fullmatch(r"(?:[0-9.]+(?:ms|s|m|h))+", duration), duration
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(number) * units[unit] for number, unit in re.findall(r"([0-9.]+)(ms|s|m|h)", duration))


KEY = {"SECRET_KEY": "k" * 50}


def test_the_web_ports_are_published_on_loopback_unless_the_deployer_opens_them() -> None:
    assert compose(KEY)["services"]["web"]["ports"] == ["127.0.0.1:8000-8001:8000"]
    opened = compose({**KEY, "WEB_PUBLISH_ADDRESS": "0.0.0.0"})
    assert opened["services"]["web"]["ports"] == ["0.0.0.0:8000-8001:8000"]


def test_a_secret_key_file_is_enough_and_a_deploy_without_any_key_is_refused() -> None:
    from_file = compose({"SECRET_KEY_FILE": "/run/secrets/secret_key"})["services"]["web"]["environment"]
    assert from_file["SECRET_KEY_FILE"] == "/run/secrets/secret_key" and from_file["SECRET_KEY"] == ""
    assert compose(KEY)["services"]["worker"]["environment"]["SECRET_KEY"] == "k" * 50
    with pytest.raises(Refused, match=r"set SECRET_KEY \(or SECRET_KEY_FILE\) in \.env"):
        compose({})


@pytest.mark.parametrize("grace", [None, "45", "600", "12.5"])
def test_docker_waits_for_the_bridges_longer_than_their_grace_whatever_it_is(grace: str | None) -> None:
    env = {**KEY, **({"BRIDGES_STOP_GRACE_SECONDS": grace} if grace else {})}
    bridges = compose(env)["services"]["bridges"]
    given = float(bridges["environment"]["BRIDGES_STOP_GRACE_SECONDS"])
    assert given == (float(grace) if grace else settings.BRIDGES_STOP_GRACE_SECONDS)  # the same default
    # runbridges ends within its grace and 5 s of disconnecting: Docker's kill comes later
    assert seconds(bridges["stop_grace_period"]) >= given + 5 + 2
