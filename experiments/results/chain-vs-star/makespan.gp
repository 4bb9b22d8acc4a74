set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics
set key below horizontal
set output 'experiments/results/chain-vs-star/makespan.png'
set title "chain-vs-star: makespan per policy (median of runs, bars min..max)"
set ylabel 'makespan (s)'
set logscale y
set style data histograms
set style histogram errorbars gap 2 lw 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -20
set yrange [*:*]
plot 'experiments/results/chain-vs-star/makespan.dat' using 2:3:4:xtic(1) title 'proportional/star', 'experiments/results/chain-vs-star/makespan.dat' using 5:6:7:xtic(1) title 'proportional/chain', 'experiments/results/chain-vs-star/makespan.dat' using 8:9:10:xtic(1) title 'model'
