"""Item quality: the item bank and the audits over it - which of a benchmark's items are good.

- :mod:`lib.items.bank` - every answer of every model, style and run pooled per item (dataset,
  digest, id) in one Parquet file, with people's verdicts where there are any; appended by run,
  rebuilt on demand.
"""
