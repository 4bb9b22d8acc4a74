// The study skeleton (study_runner.hpp): one loop over clusters, cells and repetitions, and the
// files around the kind's own, for every kind of study.
#include "study_runner.hpp"

#include <chrono>

#include <fmt/format.h>

#include "tessera/core/time.hpp"

namespace tessera::experiment::steps {

RunCounter::RunCounter(std::ostream& progress, std::size_t total)
    : progress_(progress), total_(total), start_(std::chrono::steady_clock::now()) {}

void RunCounter::finished(std::string_view what) {
  ++done_;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  progress_ << fmt::format("[{}/{}] {}  ETA {}\n", done_, total_, what,
                           format_duration(elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_)));
}

Status run_study(StudyKind& kind, const ExperimentOptions& options, std::ostream& progress) {
  progress << std::unitbuf;  // progress lines reach a log file as they happen
  kind.set_require_all(options.require_all);
  const StudyOutline& outline = kind.outline();
  Result<std::string> folder = make_output_folder(options.out_dir, outline.name, outline.output_subfolder);
  if (!folder) return folder.status();
  const std::string out_dir = *folder;
  TESSERA_RETURN_IF_ERROR(kind.prepare(out_dir, progress));

  const uint32_t repeat = options.repeat.value_or(outline.repeat);
  const uint32_t passes = outline.warmup + repeat;  // warm-ups first (StudyOutline::warmup)
  const std::size_t cells = kind.cells();
  emulation::LocalClusterOptions local;
  local.run_dir = options.run_dir;
  const std::string started_at = utc_now(UtcFormat::kReadable);
  const auto start = std::chrono::steady_clock::now();
  RunCounter counter(progress, kind.cluster_count() * passes * cells);
  Status outcome = Status::ok();

  for (std::size_t index = 0; index < kind.cluster_count() && outcome.is_ok() && !interrupted(options); ++index) {
    // Stopped (if this study started it) when `cluster` goes, whatever happened.
    Result<std::unique_ptr<StudyCluster>> cluster = kind.open_cluster(index, local, progress);
    if (!cluster) {
      outcome = cluster.status();
      break;
    }
    outcome = kind.use_cluster(**cluster, index);
    session::RunControl control;
    control.cancel = options.interrupted;
    if (outline.show_notices) control.on_notice = [&](const std::string& notice) { progress << "  " << notice << "\n"; };
    for (std::size_t step = 0; step < cells * passes && outcome.is_ok() && !interrupted(options); ++step) {
      const std::size_t cell = outline.interleaved ? step % cells : step / passes;
      const auto repetition = static_cast<uint32_t>(outline.interleaved ? step / cells : step % passes) + 1;
      outcome = kind.run_cell(**cluster, index, cell, repetition, control, counter);
    }
  }
  if (interrupted(options) && outcome.is_ok()) outcome = Status(outline.interrupted_code, "interrupted");

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  TESSERA_RETURN_IF_ERROR(kind.write_tables(out_dir));
  Plots plots;
  if (counter.done() > 0) kind.draw_plots(out_dir, plots);
  std::string repetition_note = outline.interleaved ? ", interleaved" : "";
  if (outline.warmup > 0) {
    repetition_note += fmt::format(", after {} untimed warm-up pass{} over every combination", outline.warmup,
                                   outline.warmup == 1 ? "" : "es");
  }
  std::string md = report_header(outline.name, outline.description, outline.source_path, options.command_line,
                                 started_at, seconds, repeat, repetition_note, outcome.is_ok());
  md += kind.report_body();
  md += "\n";
  for (const auto& [file, caption] : plots.files) md += fmt::format("![{}]({})\n\n*{}*\n\n", file, file, caption);
  for (const std::string& problem : plots.problems) md += "Plot not drawn: " + problem + "\n\n";
  md += outline.files_note;
  TESSERA_RETURN_IF_ERROR(write_text_file(out_dir + "/report.md", md));
  progress << fmt::format("{} runs in {}; results in {}/report.md\n", counter.done(), format_duration(seconds), out_dir);
  return outcome;
}

}  // namespace tessera::experiment::steps
