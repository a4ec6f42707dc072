"""The pages of the web app. These addresses are stable: bots and e-mails link to them."""

from __future__ import annotations

from django.urls import path

from .views import account, agents, bridges, chats, files, home, inbox, memory

urlpatterns = [
    path("", home.home, name="home"),
    # Your settings → Memory
    path("settings/", home.settings_home, name="settings"),
    path("settings/memory/", memory.memory_tab, name="memory-tab"),
    path("settings/memory/switch/", memory.memory_switch, name="memory-switch"),
    path("settings/memory/provider/", memory.memory_provider, name="memory-provider"),
    path("settings/memory/saving/", memory.memory_saving, name="memory-saving"),
    path("settings/memory/messaging/", memory.memory_messaging, name="memory-messaging"),
    path("settings/memory/growing/", memory.memory_growing, name="memory-growing"),
    path("settings/memory/synthesize/", memory.memory_synthesize, name="memory-synthesize"),
    path("settings/memory/export/", memory.memory_export, name="memory-export-download"),
    path("settings/memory/forget/", memory.memory_forget, name="memory-forget-page"),
    path("settings/memory/import/", memory.memory_import, name="memory-import"),
    path("settings/memory/notes/add/", memory.memory_note_add, name="memory-note-add"),
    path("settings/memory/notes/delete/", memory.memory_note_delete, name="memory-note-delete"),
    path("settings/memory/notes/importance/", memory.memory_note_importance, name="memory-note-importance"),
    path("settings/memory/note/", memory.memory_note, name="memory-note"),
    path("settings/memory/folder/delete/", memory.memory_folder_delete, name="memory-folder-delete"),
    path("settings/memory/addon-forgets/<int:request_id>/ask/", memory.memory_addon_forget_ask,
         name="memory-addon-forget-ask"),
    # Your account: password, API tokens, deleting it
    path("account/", account.account_page, name="account"),
    path("account/password/", account.password_change, name="account-password"),
    path("account/tokens/new/", account.token_new, name="account-token-new"),
    path("account/tokens/<int:token_id>/revoke/", account.token_revoke, name="account-token-revoke"),
    path("account/tokens/revoke-all/", account.tokens_revoke_all, name="account-tokens-revoke-all"),
    path("account/delete/", account.account_delete, name="account-delete"),
    # Chats
    path("chats/", chats.chat_list, name="chat-list"),
    path("chats/new/", chats.chat_new, name="chat-new"),
    path("chats/<int:chat_id>/", chats.chat_page, name="chat-page"),
    path("chats/<int:chat_id>/send/", chats.chat_send, name="chat-send"),
    path("chats/<int:chat_id>/memory/", chats.chat_memory_switch, name="chat-memory-switch"),
    path("chats/<int:chat_id>/delete/", chats.chat_delete, name="chat-delete"),
    # Inbox, proposals, Undo
    path("inbox/", inbox.inbox, name="inbox"),
    path("inbox/<int:proposal_id>/confirm/", inbox.proposal_confirm, name="inbox-confirm"),
    path("inbox/<int:proposal_id>/reject/", inbox.proposal_reject, name="inbox-reject"),
    path("changes/<int:change_id>/undo/", inbox.change_undo, name="change-undo"),
    # Files
    path("files/", files.files_home, name="files-page"),
    path("files/open/", files.file_open, name="file-open"),
    path("files/new/", files.file_new, name="file-new"),
    path("files/history/", files.file_history, name="file-history"),
    path("files/history/restore/", files.file_restore_version, name="file-restore-version"),
    path("files/delete/", files.file_delete, name="file-delete"),
    path("files/trash/", files.trash, name="trash"),
    path("files/trash/<int:entry_id>/restore/", files.trash_restore, name="trash-restore"),
    # Agents
    path("agents/", agents.agent_list, name="agent-list"),
    path("agents/new/", agents.agent_new, name="agent-new"),
    path("agents/import/", agents.agent_import, name="agent-import"),
    path("agents/notes-export/<str:token>/", agents.agent_notes_download, name="agent-notes-download"),
    path("agents/<int:agent_id>/", agents.agent_edit, name="agent-edit"),
    path("agents/<int:agent_id>/delete/", agents.agent_delete, name="agent-delete"),
    path("agents/<int:agent_id>/export/", agents.agent_export, name="agent-export"),
    # Bridges
    path("bridges/", bridges.bridges_page, name="bridges"),
    path("bridges/new/", bridges.binding_new, name="binding-new"),
    path("bridges/<int:binding_id>/edit/", bridges.binding_edit, name="binding-edit"),
    path("bridges/<int:binding_id>/switch/", bridges.binding_switch, name="binding-switch"),
    path("bridges/<int:binding_id>/delete/", bridges.binding_delete, name="binding-delete"),
    path("bridges/<int:binding_id>/pairings/<int:pairing_id>/approve/", bridges.pairing_approve,
         name="pairing-approve"),
    path("bridges/<int:binding_id>/pairings/<int:pairing_id>/deny/", bridges.pairing_deny, name="pairing-deny"),
    path("bridges/senders/<int:sender_id>/permission/", bridges.sender_permission, name="sender-permission"),
    path("bridges/senders/<int:sender_id>/unpair/", bridges.sender_unpair, name="sender-unpair"),
    path("bridges/senders/<int:sender_id>/unblock/", bridges.sender_unblock, name="sender-unblock"),
]
