from tests.chats.helpers import model  # noqa: F401  (the model fixture)
