import asyncio
import uuid

import pytest

from conftest import TENANT, url
from mneme_client import AsyncMneme, MnemeError, VersionError


def test_async_client():
    async def main():
        async with await AsyncMneme.connect(url("MNEME_APP_URL"), tenant=TENANT) as m:
            conv = uuid.uuid4()
            assert await m.version() == "1.0.0"
            await m.add_message(conv, "user", "She moved to Lisbon last spring.")
            mem = await m.remember(conv, "Alice lives in Lisbon")
            assert [r.memory_id for r in await m.search(conv, "Alice")] == [mem]
            assert await m.context(conv, "where does Alice live?", 200) == "- Alice lives in Lisbon"
            assert (await m.inspect(mem)).status == "active"
            async with m.transaction() as tx:
                await tx.add_message(conv, "assistant", "Noted.")
                assert len(await tx.messages(conv)) == 2
            with pytest.raises(MnemeError) as e:
                await m.context(conv, "x", 0)
            assert e.value.sqlstate == "22023" and "the budget is the most words" in e.value.hint
            with pytest.raises(MnemeError) as e:
                await m.set_tenant(TENANT)
            assert e.value.sqlstate == "25P01"
            assert await m.with_tenant(None).search(conv, "Alice") == []
        with pytest.raises(VersionError):
            await AsyncMneme.connect(url("MNEME_V2_URL"))
    asyncio.run(main())
