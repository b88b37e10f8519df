"""Run by the vLLM venv: compile JSON schemas the way a vLLM server does, on both engines.

    python compile_schemas.py SCHEMAS.json TOKENIZER_DIR  -> {name: {"xgrammar": error|null, "guidance": error|null}}

xgrammar: vLLM's request validation, then a full compile against the tokenizer (a repeat count
above 128 passes the first and fails the second: the server's 500). guidance: vLLM's validation,
which compiles with llguidance against the tokenizer."""

import json
import sys
from pathlib import Path

import xgrammar as xgr
from llguidance.hf import from_tokenizer
from transformers import AutoTokenizer
from vllm.sampling_params import SamplingParams, StructuredOutputsParams
from vllm.v1.structured_output.backend_guidance import validate_guidance_grammar
from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

schemas = json.loads(Path(sys.argv[1]).read_text())
tok = AutoTokenizer.from_pretrained(sys.argv[2])
compiler = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tok))
ll_tok = from_tokenizer(tok)
out = {}
for name, schema in schemas.items():
    result = {}
    try:
        validate_xgrammar_grammar(
            SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))
        )
        compiler.compile_json_schema(json.dumps(schema))
        result["xgrammar"] = None
    except Exception as e:  # noqa: BLE001 - the engine's own message is the point
        result["xgrammar"] = f"{type(e).__name__}: {e}"[:300]
    try:
        validate_guidance_grammar(
            SamplingParams(structured_outputs=StructuredOutputsParams(json=schema)), ll_tok
        )
        result["guidance"] = None
    except Exception as e:  # noqa: BLE001
        result["guidance"] = f"{type(e).__name__}: {e}"[:300]
    out[name] = result
print(json.dumps(out))
