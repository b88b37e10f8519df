"""Item quality: the item bank and the audits over it - which of a benchmark's items are good.

- :mod:`lib.items.bank` - every answer of every model, style and run pooled per item (dataset,
  digest, id) in one Parquet file, with people's verdicts where there are any; appended by run,
  rebuilt on demand.
- :mod:`lib.items.classical` - per item: share correct, corrected point-biserial discrimination,
  the most common wrong answer; flags (saturated, never right, negative discrimination, a wrong
  answer the respondents agree on).
- :mod:`lib.items.irt` - a two-parameter logistic fit (difficulty, discrimination, their standard
  errors) where enough respondents answered.
- :mod:`lib.items.subsets` - a tenth of the items that estimates every respondent's accuracy,
  checked by leaving each respondent out.

``python -m lib.items`` builds a bank from runs and reports on it.
"""
