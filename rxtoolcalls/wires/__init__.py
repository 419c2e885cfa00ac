"""One reader per wire; each maps its events onto the core and knows no other wire.

- ``chat``: OpenAI Chat Completions chunks (and every "OpenAI-compatible" server).
- ``responses``: OpenAI Responses API events (``response.*``).
- ``anthropic``: Anthropic Messages events (``message_start`` … ``message_stop``).
- ``gemini``: Google Gemini ``streamGenerateContent`` responses (``candidates``).
"""
