"""Params files: flat YAML mappings, read so that a repeated key or an alias is an error."""

from __future__ import annotations

from pathlib import Path

import yaml

from lib.config.errors import ParamsError, short


class _ParamsLoader(yaml.SafeLoader):
    """YAML for params: a repeated key is an error (YAML itself keeps the last silently), and
    anchors/aliases are refused (an alias bomb expands a few hundred bytes into gigabytes)."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(
                f"line {event.start_mark.line + 1}: aliases (*{event.anchor}) are not allowed in "
                f"params files: write the value out"
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.YAMLError(
                    f"line {key_node.start_mark.line + 1}: key {key!r} appears twice"
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def parse_yaml(text: str, where: str):
    """Parse params YAML (a value of ``--set`` or a file), errors naming ``where``."""
    try:
        return yaml.load(text, Loader=_ParamsLoader)
    except yaml.YAMLError as e:
        raise ParamsError(f"{where}: not valid params YAML ({short(str(e), 300)})") from None
    except RecursionError:
        raise ParamsError(f"{where}: nested too deeply to be params") from None


def load_layer(path: str | Path) -> dict:
    """One flat YAML params file (a missing file is an error naming it)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ParamsError(f"{path}: no such params file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ParamsError(f"{path}: cannot read it ({e})") from None
    data = parse_yaml(text, str(path)) or {}
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: a params file is a flat mapping of parameter names to values")
    return data
