"""The task-set tools' names for the one OpenAI-compatible client (rubrics, decomposition).

:class:`LLMClient` is :class:`infra.openai_client.ChatClient`, built from an :class:`LLMConfig`
(:class:`~infra.openai_client.ChatEndpoint`); the guarantees are that module's:

- Every reply is checked by a caller-given ``validate`` function; a reply it rejects is never
  returned. Replies are parsed strictly (:func:`~infra.openai_client.json_reply`): a reasoning
  model's ``<think>`` block dropped, then one JSON object, alone or in one ```json fenced block,
  no duplicate keys, no NaN.
- The one retry policy of :mod:`infra.openai_client`; :class:`LLMRejected` says why, with the
  last reason. The API key: ``api_key`` when given, else ``OPENAI_API_KEY``, else none (a
  placeholder).
"""

from __future__ import annotations

from infra.openai_client import ChatClient, ChatEndpoint, NoValidReply, ReplyError, json_reply

# The names the task tools and their tests know these by. Usage::
#
#     llm = LLMClient(LLMConfig(base_url="http://127.0.0.1:8000/v1", model="Qwen/Qwen3-8B"))
#     value = llm.ask(messages, validate=my_parser)  # raises LLMRejected after max_attempts
LLMConfig = ChatEndpoint
LLMClient = ChatClient
LLMReplyError = ReplyError
LLMRejected = NoValidReply
# parse_json_object(text, keys): the reply's one JSON object with exactly ``keys``.
parse_json_object = json_reply


def as_client(llm: LLMClient | LLMConfig) -> LLMClient:
    return llm if isinstance(llm, LLMClient) else LLMClient(llm)


def mentions(text: str, phrase: str) -> bool:
    """Case-insensitive substring test, whitespace collapsed on both sides."""
    needle = " ".join(phrase.split()).casefold()
    return bool(needle) and needle in " ".join(text.split()).casefold()
