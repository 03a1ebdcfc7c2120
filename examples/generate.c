// A complete program on strata's public API and nothing else (it is compiled with include/ as
// its only include path): open a model, tokenize a prompt in the model's chat format, stream a
// reply, print the statistics.
//
//   build/examples/generate MODEL.gguf "PROMPT" [N_TOKENS]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata.h"

static int print_token(void *user, int32_t tok, const char *text, size_t len)
{
    (void)user;
    (void)tok;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N_TOKENS]\n", argv[0]);
        return 2;
    }
    const int n_predict = argc == 4 ? atoi(argv[3]) : 64;
    if (n_predict < 1) {
        fprintf(stderr, "N_TOKENS must be a positive number\n");
        return 2;
    }

    struct strata_engine_params ep = strata_engine_default_params();
    ep.model = argv[1];
    struct strata_engine *e = NULL;
    if (strata_engine_open(&e, &ep)) {
        fprintf(stderr, "cannot open %s: %s\n", argv[1], strata_last_error());
        return 1;
    }
    struct strata_model_info info;
    strata_engine_info(e, &info);
    fprintf(stderr, "%s (%s), %u layers, %u experts (%u per token), backend %s\n", info.name, info.arch,
            info.n_layer, info.n_expert, info.n_expert_used, info.backend);

    // The prompt as one user turn of the model's chat format, then its tokens.
    const struct strata_chat_msg msg = {"user", argv[2]};
    char *text = NULL;
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    struct strata_session *s = NULL;
    struct strata_generate_result r = {0};
    int rc = strata_chat_apply(e, &msg, 1, true, &text);
    if (rc == 0) {
        const size_t cap = 3 * strlen(text) + 2;
        prompt = malloc(cap * sizeof *prompt);
        rc = prompt ? strata_tokenize(e, text, strlen(text), true, true, prompt, cap, &n_prompt) : STRATA_ENOMEM;
    }
    if (rc == 0) rc = strata_session_create(&s, e, NULL);
    if (rc == 0) {
        struct strata_generate_params gp = {
            .n_predict = n_predict,
            .sampling = strata_sampling_default(),
            .on_token = print_token,
        };
        rc = strata_generate(s, prompt, (int)n_prompt, &gp, &r);
    }
    if (rc == 0) {
        struct strata_stats st;
        strata_session_stats(s, &st);
        const struct strata_expert_stats *x = &st.experts[STRATA_TIER_HOST];
        fprintf(stderr, "\n\nprompt %d tokens in %.2f s, generated %d in %.2f s (%s); experts: %llu hits, %llu misses\n",
                r.n_prompt, r.t_prompt, r.n_generated, r.t_decode,
                r.stop == STRATA_STOP_EOG ? "end of turn" : "length", (unsigned long long)x->hits,
                (unsigned long long)x->misses);
    } else {
        fprintf(stderr, "error: %s\n", strata_engine_errmsg(e));
    }
    strata_generate_result_free(&r);
    strata_session_free(s);
    free(prompt);
    free(text);
    strata_engine_close(e);
    return rc ? 1 : 0;
}
