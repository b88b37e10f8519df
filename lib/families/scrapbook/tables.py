"""Stage 06's score tables of Scrapbook's protocol (the family's ``SCORE_TABLES``): ``levels.csv``
(accuracy per validation level, concept and form) and ``errors.csv`` (overall and the error
categories), from which the paper's Tables 8-15 are made; their names and columns, each led by the
dataset and style stage 06 adds to a group's frame."""

from lib.families.scrapbook.consistency import LEVEL_COLUMNS as PROTOCOL_LEVEL_COLUMNS

LEVELS, ERRORS = "levels", "errors"
LEVEL_COLUMNS = ["dataset", "style", *PROTOCOL_LEVEL_COLUMNS]
ERROR_COLUMNS = [
    "dataset",
    "style",
    "model",
    "filter",
    "unit",
    "category",
    "count",
    "share",
    "correct",
    "accuracy",
]
