"""Every page asks a visitor to log in first, and comes back to where they were going."""

from __future__ import annotations

import pytest

PAGES = ["/", "/settings/memory/", "/settings/memory/export/", "/settings/memory/forget/", "/chats/", "/chats/1/",
         "/inbox/", "/files/", "/files/trash/", "/files/open/?path=Memory/index.md", "/agents/", "/agents/new/",
         "/agents/1/", "/bridges/", "/account/"]


@pytest.mark.parametrize("path", PAGES)
def test_a_visitor_who_is_not_logged_in_is_sent_to_the_login_page(client, db, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")
