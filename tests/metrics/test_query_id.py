"""One query identity: the Scrapbook protocol's, which the generator's caches use too."""

import ast
import json

from lib.core.paths import ROOT
from lib.families.scrapbook.consistency import query_id


def test_a_query_id_is_its_canonical_json_whatever_the_key_order():
    a = {
        "type": "presence",
        "group": "rel",
        "target": {"shape": "circle", "color": "red"},
        "relation": "left",
        "reference": {"shape": "square"},
    }
    b = {
        "reference": {"shape": "square"},
        "relation": "left",
        "target": {"color": "red", "shape": "circle"},
        "group": "rel",
        "type": "presence",
    }
    assert query_id(a) == query_id(b) == json.dumps(a, sort_keys=True)
    assert json.loads(query_id(a)) == a  # the query back, keys sorted
    assert (
        query_id(a)
        != query_id({**a, "relation": "right"})
        != query_id({**a, "target": {"color": "red"}})
    )


def test_the_protocol_owns_the_identity_without_reaching_up_to_the_generator():
    tree = ast.parse((ROOT / "lib" / "families" / "scrapbook" / "consistency.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m.startswith("lib.families.scrapbook") for m in imported), (
        imported
    )  # not the generator's modules
