"""One Unique All dataset (the paper's Table 2 parameters, 162 images) for every Scrapbook test."""

import pytest
import yaml

from lib.paths import PARAMS
from lib.scrapbook import ScrapbookParams, generate


@pytest.fixture(scope="session")
def unique_all(tmp_path_factory):
    data = yaml.safe_load((PARAMS / "04_scrapbook.unique_all.yaml").read_text())
    out = tmp_path_factory.mktemp("unique_all")
    stats = generate(ScrapbookParams.from_dict(data), out, progress=False)
    return out, stats
