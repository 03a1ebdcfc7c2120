// Stop strings in streamed text (srv_stop_find): the earliest match over all stop strings, a
// match that straddles what was already scanned, and how much text is final, i.e. cannot turn
// into the start of a stop string when more text comes.
#include <string.h>

#include "check.h"
#include "server/server.h"

static void expect(const char *name, char *const *stops, int n, const char *text, size_t from,
                   int want_index, size_t want_at, size_t want_final)
{
    size_t at = 0, final_len = 0;
    int got = srv_stop_find(stops, n, text, strlen(text), from, &at, &final_len);
    CHECK(got == want_index && (got < 0 || at == want_at) && final_len == want_final,
          "%s: index %d at %zu final %zu, want %d at %zu final %zu", name, got, at, final_len,
          want_index, want_at, want_final);
}

int main(void)
{
    int before = g_failures;
    char *one[] = {"END"};
    char *two[] = {"xyz", "b c"};
    char *empty[] = {""};
    expect("no stop strings", NULL, 0, "hello", 0, -1, 0, 5);
    expect("no match", one, 1, "hello", 0, -1, 0, 5);
    expect("match", one, 1, "abcEND tail", 0, 0, 3, 3);
    expect("partial at the end is held back", one, 1, "abcEN", 0, -1, 0, 3);
    expect("one byte held back", one, 1, "abcE", 0, -1, 0, 3);
    expect("match straddling the scanned part", one, 1, "abcEND", 4, 0, 3, 3);
    expect("match entirely before from is not reported again", one, 1, "ENDabc", 5, -1, 0, 6);
    expect("earliest of two", two, 2, "a b c xyz", 0, 1, 2, 2);
    expect("earliest of two, other order", two, 2, "xyz b c", 0, 0, 0, 0);
    expect("hold back the longer partial", two, 2, "a xy", 0, -1, 0, 2);
    expect("empty stop string ignored", empty, 1, "abc", 0, -1, 0, 3);
    expect("stop at the very start", one, 1, "END", 0, 0, 0, 0);
    case_result("stop strings: matches, straddles, hold-back", before);
    return g_failures ? 1 : 0;
}
