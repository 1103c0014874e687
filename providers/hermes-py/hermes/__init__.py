"""The `hermes-text` dialect: OpenAI Chat Completions from servers that return tool
calls as text markup (vLLM without a tool parser, llama.cpp without `--jinja`).

Pure Python with no componentize-py imports, so every module runs and tests under
plain CPython; `app.py` and `chat.py` convert between these records and the WIT
bindings at the component boundary.
"""
