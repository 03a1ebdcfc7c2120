// Tokenizer: byte-level BPE ("gpt2" GGUF vocabularies: Qwen2/3, Qwen3.5, Llama-3, GLM-4,
// DeepSeek-style), the streaming detokenizer, chat formatting and the writers of tokenizer
// metadata (from a HF tokenizer.json, or a small built-in vocabulary for synthetic models).
//
// Reference behaviour is llama.cpp's llama_tokenize(vocab, text, add_special = false,
// parse_special) and llama_token_to_piece(..., special): token ids must agree exactly.
//
// Data the tokenizer reads from GGUF (key -> use):
//   tokenizer.ggml.model       must be "gpt2" (other models: STRATA_EUNSUP)
//   tokenizer.ggml.pre         pre-tokenizer family (see strata_tokenizer_pre_name())
//   tokenizer.ggml.tokens      [n_vocab] strings, GPT-2 byte-to-unicode encoded; ids are indices
//   tokenizer.ggml.token_type  [n_vocab] i32, enum strata_token_type (absent: all normal)
//   tokenizer.ggml.merges      ["left right", ...] in rank order
//   tokenizer.ggml.{bos,eos,eot,eom,unknown,seperator,padding}_token_id  u32
//   tokenizer.ggml.add_bos_token / add_eos_token  bool
//   tokenizer.chat_template    Jinja text, only inspected to pick a built-in chat format
#ifndef STRATA_TOKENIZER_H
#define STRATA_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strata.h"  // the chat, tool-call and detokenizer types, shared with the public API

struct strata_gguf_file;
struct strata_gguf_writer;
struct strata_tokenizer;

#define STRATA_TOKEN_NULL (-1)

// Values of tokenizer.ggml.token_type (same numbering as llama.cpp and gguf-py).
enum strata_token_type {
    STRATA_TOKEN_TYPE_UNDEFINED = 0,
    STRATA_TOKEN_TYPE_NORMAL = 1,
    STRATA_TOKEN_TYPE_UNKNOWN = 2,
    STRATA_TOKEN_TYPE_CONTROL = 3,       // special: matched in text only when parse_special
    STRATA_TOKEN_TYPE_USER_DEFINED = 4,  // added token: always matched in text, shown verbatim
    STRATA_TOKEN_TYPE_UNUSED = 5,        // padding holes ("[PAD123]"): never produced, no text
    STRATA_TOKEN_TYPE_BYTE = 6,          // "<0xAB>" byte-fallback tokens
    STRATA_TOKEN_TYPE_COUNT
};

// Everything a caller needs besides tokenize/detokenize. Ids are STRATA_TOKEN_NULL when absent.
struct strata_tokenizer_info {
    uint32_t n_vocab;    // tokens (the model's vocabulary dimension must equal it)
    uint32_t n_merges;
    const char *pre;     // tokenizer.ggml.pre as stored ("" if absent); borrowed
    int32_t bos, eos, eot, eom, pad, unk, sep;
    bool add_bos;        // the model expects bos before a prompt (the caller adds it)
    bool add_eos;
    uint32_t n_special;  // tokens matched as a whole in text (control, user-defined, unknown)
};

// ---- loading -----------------------------------------------------------------------------------

// Build a tokenizer from the tokenizer.* metadata of an open GGUF file. The file may be closed
// afterwards: *out owns copies of everything. Fails with STRATA_EUNSUP for non-"gpt2" models and
// unknown pre-tokenizers, STRATA_EFORMAT for malformed or inconsistent metadata (duplicate token
// strings, types/ids out of range, wrong value types). Loading a 151k vocabulary takes tens of ms.
int strata_tokenizer_load(struct strata_tokenizer **out, const struct strata_gguf_file *f);
void strata_tokenizer_free(struct strata_tokenizer *t);

// Borrowed until strata_tokenizer_free.
const struct strata_tokenizer_info *strata_tokenizer_get_info(const struct strata_tokenizer *t);

// The i-th tokenizer.ggml.pre value this tokenizer implements; NULL past the last.
const char *strata_tokenizer_pre_name(size_t i);

// ---- tokenize ----------------------------------------------------------------------------------

// Tokenize text[0..len) (UTF-8; invalid bytes are handled exactly as llama.cpp does: each
// becomes U+FFFD). Never adds bos/eos: prepend info->bos yourself when info->add_bos.
// parse_special: control and unknown tokens written literally in the text (e.g. "<|im_start|>")
// become those tokens; user-defined tokens (e.g. Qwen3's "<think>") always do.
// Writes at most cap ids to out; *n_out receives the full count (out NULL with cap 0 just
// counts). Returns 0, -ENOSPC (logged) when the ids did not fit (call again with
// cap >= *n_out; 3 * len is enough for any vocabulary whose merges only make tokens),
// STRATA_EARG for a code point past U+10FFFF (4-byte sequences F4 90.. to F7 BF..), which
// llama.cpp rejects too (it throws), or -ENOMEM. Thread-safe: the tokenizer is read-only.
int strata_tokenizer_encode(const struct strata_tokenizer *t, const char *text, size_t len,
                    bool parse_special, int32_t *out, size_t cap, size_t *n_out);

// Id of a token given its exact text (the GPT-2 encoded form for normal tokens), or
// STRATA_TOKEN_NULL.
int32_t strata_tokenizer_find(const struct strata_tokenizer *t, const char *text, size_t len);

// ---- detokenize --------------------------------------------------------------------------------

// Raw bytes of one token, as llama_token_to_piece(..., lstrip 0, special): normal tokens are
// decoded from the byte-to-unicode form, user-defined tokens are their text, control/unknown
// tokens their text only when `special` (else empty), unused/undefined tokens empty. The bytes
// need not be valid UTF-8 (a token can end inside a character). Borrowed until free.
// Returns 0 or STRATA_EARG for an id out of range.
int strata_token_to_piece(const struct strata_tokenizer *t, int32_t id, bool special,
                          const char **piece, size_t *len);

// Token text as stored in the vocabulary (GPT-2 encoded for normal tokens); NULL if out of range.
const char *strata_token_text(const struct strata_tokenizer *t, int32_t id, size_t *len);
enum strata_token_type strata_token_type_of(const struct strata_tokenizer *t, int32_t id);
// End of generation: eos, eot, eom and the end-of-turn tokens llama.cpp recognises by text.
bool strata_tokenizer_is_eog(const struct strata_tokenizer *t, int32_t id);

// Streaming detokenizer (struct strata_detok, strata_detok_init and strata_detok_flush are public,
// include/strata.h): feed tokens one at a time, get back only complete, valid UTF-8. A token that
// ends inside a multi-byte character is held until the next one completes it; bytes that can never
// form a valid character come out as U+FFFD (one per maximal invalid subpart, as the Unicode
// standard recommends), and flush ends a dangling partial character with U+FFFD.
// Append the bytes that became printable to out; *n_out bytes written. A token whose piece
// is L bytes long writes at most 3 * (L + 1) bytes (every byte may turn into U+FFFD).
// Returns 0, -ENOSPC (nothing consumed; logged) or STRATA_EARG (bad id).
int strata_detok_push(struct strata_detok *d, const struct strata_tokenizer *t, int32_t id,
                      char *out, size_t cap, size_t *n_out);

// ---- writing tokenizer metadata ----------------------------------------------------------------

struct strata_hf_import_opts {
    const char *pre;     // tokenizer.ggml.pre to store; NULL: "qwen2"
    uint32_t n_vocab_min; // pad with "[PADn]" unused tokens up to this many (0: no padding)
};

// Read a Hugging Face tokenizer.json (model.vocab, model.merges as "a b" strings or [a, b]
// pairs, added_tokens) and set tokenizer.ggml.* on w, the way llama.cpp's converter does:
// missing ids become "[PADn]" unused tokens, added tokens that are special (or look like
// "<|...|>") are control, other added tokens user-defined. chat_template_path (may be NULL) is
// either a tokenizer_config.json (its chat_template, bos/eos/pad tokens and add_bos_token are
// used) or a raw Jinja file. bos/eos/pad default to <|endoftext|> / <|im_end|> / <|endoftext|>
// when present. *n_vocab_out: the number of tokens written.
int strata_tokenizer_import_hf(struct strata_gguf_writer *w, const char *tokenizer_json_path,
                               const char *chat_template_path, uint32_t *n_vocab_out);
int strata_tokenizer_import_hf_ex(struct strata_gguf_writer *w, const char *tokenizer_json_path,
                                  const char *chat_template_path,
                                  const struct strata_hf_import_opts *opts,
                                  uint32_t *n_vocab_out);

// Write a small built-in byte-level BPE vocabulary of exactly n_vocab tokens: the 256 byte
// tokens, merges learned by BPE training on an embedded English text (deterministic), then
// <|endoftext|>, <|im_start|>, <|im_end|> (control) as the last three ids; pre "qwen2", eos
// <|im_end|>, a ChatML chat template. If the text runs out of merges first, the remaining ids
// are "[PADn]" unused tokens before the specials. n_vocab must be at least 259.
int strata_tokenizer_write_builtin(struct strata_gguf_writer *w, uint32_t n_vocab);

// ---- chat --------------------------------------------------------------------------------------

// Render a conversation the way llama.cpp's llama_chat_apply_template does: the family is
// detected from the template text (or given by name: "chatml", "llama3", "chatglm4",
// "deepseek3", ...), then a built-in formatter writes it; no Jinja is interpreted. NULL
// template means "chatml". Families: chatml (Qwen2/3, <|im_start|>), chatglm4 (GLM-4/4.5,
// "[gMASK]<sop>"), chatglm3, glmedge, llama3, deepseek2, deepseek3 (DeepSeek V3/R1). Anything
// else, including families llama.cpp knows but we do not implement: STRATA_EUNSUP, logged with the
// family's name. *out is a NUL-terminated string the caller frees.
int strata_chat_render(const char *template_text, const struct strata_chat_msg *msgs, size_t n,
                      bool add_generation_prompt, char **out);

// Name of the family strata_chat_render would use ("chatml", ...; "unknown" if none).
const char *strata_chat_family(const char *template_text);

// ---- tool calling ------------------------------------------------------------------------------

// How a model writes tool calls, from the markers in its chat template: Qwen3 (ChatML template
// with <tools> and <tool_call>: a JSON object {"name", "arguments"} between <tool_call> and
// </tool_call>) or GLM-4.5 ("[gMASK]<sop>" template with <arg_key>: <tool_call>NAME then
// <arg_key>K</arg_key><arg_value>V</arg_value> pairs, then </tool_call>).
enum strata_tool_format strata_chat_tool_format(const char *template_text);

// Like strata_chat_render, plus tools: tools_json is a JSON array of OpenAI tool objects
// ({"type": "function", "function": {"name", "description", "parameters"}}; NULL or "[]" for
// none), assistant turns may carry tool calls and "tool" turns carry results. For the Qwen3
// and GLM-4.5 formats the text is what their Jinja templates print (tools in the system turn,
// reasoning kept only after the last user turn); other templates go to strata_chat_render and
// refuse tools (STRATA_EUNSUP). STRATA_EARG for malformed tools or call arguments.
int strata_chat_render_tools(const char *template_text, const struct strata_chat_turn *msgs,
                            size_t n, const char *tools_json, bool add_generation_prompt,
                            char **out);

// Split generated text into content and tool calls. A call that is not well formed stays in the
// content as written; a call cut off at the end of the text is parsed if what is there is
// complete. tools_json (may be NULL) supplies GLM-4.5 parameter types: a value is a string when
// its schema says so, else JSON when it parses. When calls are found the content is trimmed.
// *content (NUL-terminated) and *calls are owned by the caller (strata_chat_tool_calls_free).
int strata_chat_parse_tools(enum strata_tool_format fmt, const char *text, size_t len,
                            const char *tools_json, char **content,
                            struct strata_tool_call_out **calls, size_t *n_calls);
void strata_chat_tool_calls_free(struct strata_tool_call_out *calls, size_t n);

// Streaming: the length of text[0..len) that is content for sure, i.e. up to the first
// "<tool_call>", or up to a trailing piece that may be the start of one.
size_t strata_chat_tool_safe_len(const char *text, size_t len);

#endif
