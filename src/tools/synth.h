// strata synth: writes a valid GGUF of a real architecture with seeded random weights, at a tiny
// test shape or at the real shape of a released model, in any computable tensor type.
#ifndef STRATA_SYNTH_H
#define STRATA_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

struct strata_synth_opts {
    const char *arch;            // "qwen3moe"
    const char *preset;          // "tiny", "qwen3-30b-a3b", ...
    const char *out_path;
    uint64_t seed;
    int type;                    // weight-matrix type, -1: the preset's default
    const char *type_overrides;  // "REGEX=T,REGEX=T" applied in order, first match wins; NULL
    int n_layer;                 // 0: the preset's
    int n_expert;                // 0: the preset's
    int idx_top_k;               // the indexer's top-k (deepseek32, glm-dsa); 0: the preset's
    int n_vocab;                 // 0: the preset's (ignored with a tokenizer file)
    const char *tokenizer_json;  // HF tokenizer.json to embed; NULL: built-in small BPE vocab
    const char *chat_template;   // jinja text file or tokenizer_config.json; NULL
    bool progress;               // progress bar on stderr
    float route_skew;            // routers' per-expert scale exp(route_skew * N(0,1)): hot and
                                 // cold experts as real routers have; 0: every row alike
};

struct strata_synth_preset_info {
    const char *arch;
    const char *name;
    const char *source;          // where the shape comes from
};

// Write the model. 0 or negative (one error line logged).
int strata_synth(const struct strata_synth_opts *o);
// llama.cpp's LLAMA_FTYPE value (general.file_type) of a file whose weights are mostly `type`
// (enum strata_type); -1 if it has none.
int strata_synth_llama_ftype(uint32_t type);
// Presets, NULL-terminated; borrowed.
const struct strata_synth_preset_info *strata_synth_presets(void);

#endif
