"""MnemeSession against the OpenAI Agents SDK's Session contract
(agents.memory.SessionABC: session_id, async get_items(limit), add_items,
pop_item, clear_session) with the SDK's item shapes. The SDK is not a
Debian package, so run() below does what its Runner does with a session
(documented: before a run it reads the history and prepends it to the new
input; after it, it stores the new input and the model's output items),
with a fake model."""
import asyncio
import uuid

import pytest

from conftest import TENANT, url
from mneme_client import AsyncMneme, MnemeError
from mneme_client.agents import MnemeSession


def text_of(item) -> str:
    c = item.get("content")
    return c if isinstance(c, str) else "".join(p.get("text", "") for p in c or [])


def fake_model(input_items: list) -> list:
    last = text_of(input_items[-1])
    answer = "Noted."
    if last.startswith("Where"):
        said = next((text_of(i) for i in input_items[:-1] if "lives in" in text_of(i)), None)
        answer = f"You told me: {said}" if said else "I do not know."
    return [{"type": "message", "role": "assistant", "status": "completed", "id": "msg_1",
             "content": [{"type": "output_text", "text": answer, "annotations": []}]}]


async def run(session, text: str, seen: list) -> str:
    new = [{"role": "user", "content": text}]
    model_input = await session.get_items() + new
    seen.append(model_input)
    output = fake_model(model_input)
    await session.add_items(new + output)
    return output[-1]["content"][0]["text"]


def test_a_later_turn_recalls_the_history():
    async def main():
        async with await AsyncMneme.connect(url("MNEME_APP_URL"), tenant=TENANT) as m:
            conv = uuid.uuid4()
            session = MnemeSession(m, conv)
            assert session.session_id == str(conv)
            seen = []
            assert await run(session, "My sister Alice lives in Lisbon.", seen) == "Noted."
            assert await run(session, "Where does Alice live?", seen) == "You told me: My sister Alice lives in Lisbon."
            assert [text_of(i) for i in seen[1]] == ["My sister Alice lives in Lisbon.", "Noted.", "Where does Alice live?"]
            assert [(x.role, x.content) for x in await m.messages(conv)] == [
                ("user", "My sister Alice lives in Lisbon."), ("assistant", "Noted."),
                ("user", "Where does Alice live?"), ("assistant", "You told me: My sister Alice lives in Lisbon.")]
            assert await session.get_items(1) == [{"type": "message", "role": "assistant", "status": "completed",
                                                    "content": [{"type": "output_text", "text": "You told me: My sister Alice lives in Lisbon.", "annotations": []}]}]
            assert len(await session.get_items()) == 4 and await session.get_items(0) == []
    asyncio.run(main())


def test_tool_items_pop_and_clear():
    async def main():
        async with await AsyncMneme.connect(url("MNEME_APP_URL"), tenant=TENANT) as m:
            conv = uuid.uuid4()
            session = MnemeSession(m, conv)
            call = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q": "Alice"}', "id": "fc_1"}
            output = {"type": "function_call_output", "call_id": "c1", "output": "Lisbon"}
            await session.add_items([{"role": "user", "content": [{"type": "input_text", "text": "Where is Alice?"}]}, call, output,
                                     {"role": "developer", "content": "be brief"}])
            assert await session.get_items() == [{"role": "user", "content": "Where is Alice?"}, call, output,
                                                 {"role": "system", "content": "be brief"}]
            # pop_item returns the items as they were stored, latest first.
            assert await session.pop_item() == {"role": "system", "content": "be brief"}
            assert await session.pop_item() == output
            await session.add_items([output, {"role": "developer", "content": "be brief"}])
            assert len(await session.get_items()) == 4
            with pytest.raises(MnemeError) as e:
                await session.clear_session()  # an erase: mneme_admin's
            assert e.value.sqlstate == "42501"
            async with await AsyncMneme.connect(url("MNEME_ADMIN_URL"), tenant=TENANT) as admin:
                await MnemeSession(admin, conv).clear_session()
            assert await session.get_items() == []
            with pytest.raises(MnemeError) as e:
                await MnemeSession(m.with_tenant("nobody"), conv).add_items([{"role": "user", "content": "hi"}])
            assert e.value.sqlstate == "22023"
    asyncio.run(main())


def test_pop_item_takes_back_the_latest_item_until_an_episode_holds_it():
    """pop_item is mneme.pop_message: the latest item comes back as stored
    and the next run's model no longer sees it; once segmentation stored
    the messages in an episode, pop_item is refused (55000, naming the
    episode) and removes nothing."""
    async def main():
        async with await AsyncMneme.connect(url("MNEME_APP_URL"), tenant=TENANT) as m:
            conv = uuid.uuid4()
            session = MnemeSession(m, conv)
            assert await session.pop_item() is None
            seen = []
            await run(session, "My sister Alice lives in Lisbon.", seen)
            await run(session, "Oops, wrong chat.", seen)
            assert await session.pop_item() == {"type": "message", "role": "assistant", "status": "completed",
                                                "content": [{"type": "output_text", "text": "Noted.", "annotations": []}]}
            assert await session.pop_item() == {"role": "user", "content": "Oops, wrong chat."}
            assert await run(session, "Where does Alice live?", seen) == "You told me: My sister Alice lives in Lisbon."
            assert [text_of(i) for i in seen[-1]] == ["My sister Alice lives in Lisbon.", "Noted.", "Where does Alice live?"]

            ids = [x.message_id for x in await m.messages(conv)]
            async with await AsyncMneme.connect(url("MNEME_WORKER_URL")) as w:
                cur = await w.conn.execute(
                    "SELECT mneme.create_episode(%s, %s::bigint[], 'user: Alice lives in Lisbon.', 'Alice', NULL, 0.1, "
                    "'general', false, 5, 5)", [conv, ids])
                episode = (await cur.fetchone())[0]
            with pytest.raises(MnemeError) as e:
                await session.pop_item()
            assert e.value.sqlstate == "55000" and str(episode) in e.value.message and "mneme.erase" in e.value.hint
            assert len(await session.get_items()) == len(ids)
    asyncio.run(main())
