"""An OpenAI Agents SDK session over one mneme conversation: its items
are the conversation's messages (mneme.add_message,
mneme.conversation_messages).

It has the methods of agents.memory.SessionABC (session_id, get_items,
add_items, pop_item, clear_session), all async, on an AsyncMneme. Message
items are stored as their role and text; any other item (a function
call, its output, reasoning) as role tool with the item's JSON, so a
run's history comes back whole. pop_item is mneme.pop_message: it removes
and returns the latest item while no memory holds it (once segmentation
stored it, MnemeError 55000 names the memory to erase instead; nothing is
removed); clear_session is mneme.erase_conversation: an erase (the
messages and every memory made of them are deleted for good; it needs a
mneme_admin login).
"""
from __future__ import annotations

import json
import uuid
from typing import Any, Optional

from . import AsyncMneme

_MESSAGE_ROLES = {"user", "assistant", "system", "developer"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text") or p.get("refusal") or "" for p in content if isinstance(p, dict)).strip("\n")
    return ""


def _to_message(item: dict) -> tuple:
    if item.get("role") in _MESSAGE_ROLES and item.get("type", "message") == "message":
        role = "system" if item["role"] == "developer" else item["role"]
        return role, _text(item.get("content"))
    return "tool", json.dumps(item, sort_keys=True)


def _to_item(role: str, content: str) -> dict:
    if role == "tool":
        try:
            item = json.loads(content)
            if isinstance(item, dict) and isinstance(item.get("type"), str):
                return item
        except ValueError:
            pass
        return {"role": "system", "content": content}
    if role == "assistant":
        return {"type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": content, "annotations": []}]}
    if role == "system":
        return {"role": "system", "content": content}
    return {"role": "user", "content": content}  # user, or a registered speaker's name


class MnemeSession:
    """A Session of the OpenAI Agents SDK backed by one mneme conversation."""

    def __init__(self, mneme: AsyncMneme, conversation_id: uuid.UUID, *,
                 clear_reason: str = "clear_session of an OpenAI Agents SDK session"):
        self.mneme, self.conversation_id, self.clear_reason = mneme, conversation_id, clear_reason
        self.session_id = str(conversation_id)

    async def get_items(self, limit: Optional[int] = None) -> list:
        items = [_to_item(m.role, m.content) for m in await self.mneme.messages(self.conversation_id)]
        if limit is None:
            return items
        return items[-limit:] if limit > 0 else []

    async def add_items(self, items: list) -> None:
        msgs = [m for m in map(_to_message, items) if m[1].strip()]
        if not msgs:
            return
        async with self.mneme.transaction() as m:
            for role, content in msgs:
                await m.add_message(self.conversation_id, role, content)

    async def pop_item(self) -> Optional[dict]:
        m = await self.mneme.pop_message(self.conversation_id)
        return None if m is None else _to_item(m.role, m.content)

    async def clear_session(self) -> None:
        await self.mneme.erase_conversation(self.conversation_id, self.clear_reason)
