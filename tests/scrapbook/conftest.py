"""One Unique All dataset (the paper's Table 2 parameters, 162 images) for every Scrapbook test."""

import pytest

from lib.config import resolve
from lib.families.scrapbook import generate
from lib.stages.scrapbook import ScrapbookConfig


@pytest.fixture(scope="session")
def unique_all(tmp_path_factory):
    params = resolve(
        ScrapbookConfig, "unique_all"
    ).cfg.params()  # the profile's generator parameters
    out = tmp_path_factory.mktemp("unique_all")
    stats = generate(params, out, progress=False)
    return out, stats
