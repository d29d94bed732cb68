/* plot_svg.c — Fast@p by turn as a dependency-free SVG line chart: one colour
 * per threshold p, solid for the per-turn value, dashed for best-of-turns. */
#include "kgym/rl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define W 640
#define H 400
#define LEFT 60
#define RIGHT 170
#define TOP 40
#define BOTTOM 50

static const char *const colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                      "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

static double x_of(const kg_metrics_report *r, size_t j)
{
    double plot_w = W - LEFT - RIGHT;
    return r->n_turns > 1 ? LEFT + plot_w * (double)j / (double)(r->n_turns - 1)
                          : LEFT + plot_w / 2;
}

static double y_of(double v)
{
    return TOP + (H - TOP - BOTTOM) * (1.0 - v);
}

static void series(FILE *f, const kg_metrics_report *r, const kg_turn_metrics *rows, size_t p,
                   const char *dash)
{
    const char *colour = colours[p % (sizeof colours / sizeof colours[0])];
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", colour,
            dash);
    for (size_t j = 0; j < r->n_turns; j++)
        if (!isnan(rows[j].fast[p]))
            fprintf(f, "%.1f,%.1f ", x_of(r, j), y_of(rows[j].fast[p]));
    fprintf(f, "\"/>\n");
    for (size_t j = 0; j < r->n_turns; j++)
        if (!isnan(rows[j].fast[p]))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", x_of(r, j),
                    y_of(rows[j].fast[p]), colour);
}

int kg_metrics_svg(const kg_metrics_report *report, char **out, kg_error *err)
{
    if (!report || !out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_metrics_svg: NULL argument");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return kg_error_set(err, KG_ERR_NOMEM, "open_memstream failed");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"15\">Fast@p by turn (%zu samples; solid: "
               "per turn, dashed: best of turns)</text>\n", LEFT, report->samples);
    for (int tick = 0; tick <= 4; tick++) {
        double v = tick / 4.0;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n",
                LEFT, W - RIGHT, y_of(v), y_of(v), LEFT - 6, y_of(v) + 4, v);
    }
    for (size_t j = 0; j < report->n_turns; j++)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n",
                x_of(report, j), H - BOTTOM + 18, (int)report->per_turn[j].turn);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">turn</text>\n",
            (LEFT + W - RIGHT) / 2, H - 12);
    fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"black\"/>\n"
               "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"black\"/>\n",
            LEFT, W - RIGHT, H - BOTTOM, H - BOTTOM, LEFT, LEFT, TOP, H - BOTTOM);
    for (size_t p = 0; p < report->n_thresholds; p++) {
        series(f, report, report->per_turn, p, "");
        series(f, report, report->best_of, p, " stroke-dasharray=\"6,4\"");
        const char *colour = colours[p % (sizeof colours / sizeof colours[0])];
        double ly = TOP + 10 + 20.0 * (double)p;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"2\"/><text x=\"%d\" y=\"%.1f\">Fast@%g</text>\n",
                W - RIGHT + 15, W - RIGHT + 45, ly, ly, colour, W - RIGHT + 52, ly + 4,
                report->thresholds[p]);
    }
    /* Correct samples but no speedup measured anywhere (CPU evaluations are not timed): every Fast@p is 0 for
     * want of timings, not for want of speed, and the chart must say so rather than look like a slow run. */
    size_t timed = 0;
    double correct = 0;
    for (size_t j = 0; j < report->n_turns; j++) {
        timed += report->per_turn[j].timed_correct;
        correct = fmax(correct, report->per_turn[j].correct_rate);
    }
    if (timed == 0 && correct > 0)
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#b00\">No speedup was measured "
                   "(CPU evaluations are not timed): Fast@p is 0 for want of timings.</text>\n",
                (LEFT + W - RIGHT) / 2, TOP + (H - TOP - BOTTOM) / 2);
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0 || !text) {
        free(text);
        return kg_error_set(err, KG_ERR_NOMEM, "could not build the SVG");
    }
    *out = text;
    return KG_OK;
}
