"""The OpenAI Agents SDK: Runner.run(agent, text, session=session) with a
session whose history is a mneme conversation."""
import asyncio
import os
import uuid

from mneme_client import AsyncMneme
from mneme_client.agents import MnemeSession


async def main():
    async with await AsyncMneme.connect(os.environ["DATABASE_URL"], tenant=os.environ.get("MNEME_TENANT")) as m:
        session = MnemeSession(m, uuid.uuid4())
        # What Runner.run does with the session after a turn:
        await session.add_items([{"role": "user", "content": "My sister Alice lives in Lisbon."},
                                 {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Noted."}]}])
        print(await session.get_items())  # what the next turn's model sees first


asyncio.run(main())
