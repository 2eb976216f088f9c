// Talks to a running server the way useChat does, with the AI SDK's own code.
//
// usage: node use_chat.mjs BASE_URL CONVERSATION_ID TOKEN TEXT
//
// 1. DefaultChatTransport sends the request useChat sends; its parser checks
//    every chunk against uiMessageChunkSchema; readUIMessageStream folds them
//    into the assistant UIMessage.
// 2. A Chat (the class behind useChat, over an in-memory state) sends a second
//    message through the same transport and keeps its messages.
// 3. GET .../chat/ is validated with validateUIMessages.
// 4. So is each page of it, a turn per page, older pages found by their Link.
// Prints one JSON object: the chunk types, the streamed message, the chat's
// messages, the validated history and its pages (newest first). Exits
// non-zero on any SDK error.
import { AbstractChat, DefaultChatTransport, validateUIMessages } from 'ai';

import { readUIStream } from './ui_stream.mjs';

const [baseUrl, conversationId, token, text] = process.argv.slice(2);
const api = `${baseUrl}/api/conversations/${conversationId}/chat/`;
const headers = { Authorization: `Token ${token}` };
const transport = new DefaultChatTransport({ api, headers });

function userMessage(id, words) {
  return { id, role: 'user', parts: [{ type: 'text', text: words }] };
}

// 1. The transport and the stream reader.
const stream = await transport.sendMessages({
  chatId: conversationId,
  messages: [userMessage('client-1', text)],
  trigger: 'submit-message',
  messageId: undefined,
  abortSignal: undefined,
});
const errors = [];
const { chunkTypes, streamed } = await readUIStream(stream, errors);

// 2. The Chat class useChat wraps.
class MemoryState {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage = message => {
    this.messages = this.messages.concat(message);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = [
      ...this.messages.slice(0, index),
      message,
      ...this.messages.slice(index + 1),
    ];
  };
  snapshot = thing => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new MemoryState() });
  }
}

const chat = new Chat({
  id: conversationId,
  transport,
  onError: error => errors.push(String(error)),
});
await chat.sendMessage({ text: 'And 6 * 7?' });

// 3. The history, validated.
const response = await fetch(api, { headers });
if (!response.ok) throw new Error(`GET ${api}: ${response.status}`);
const history = await validateUIMessages({ messages: await response.json() });

// 4. The history a turn per page: the newest page, then the older one its Link names.
const pages = [];
let pageUrl = `${api}?page_size=1`;
while (pageUrl) {
  const page = await fetch(pageUrl, { headers });
  if (!page.ok) throw new Error(`GET ${pageUrl}: ${page.status}`);
  pages.push(await validateUIMessages({ messages: await page.json() }));
  const older = /<([^>]*)>;\s*rel="next"/.exec(page.headers.get('Link') || '');
  pageUrl = older ? older[1] : null;
}

console.log(
  JSON.stringify({
    chunkTypes,
    streamed,
    chat: { status: chat.status, messages: chat.messages },
    history,
    pages,
    errors,
  }),
);
