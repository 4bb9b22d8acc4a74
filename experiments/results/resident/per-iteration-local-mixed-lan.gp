set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics
set key below horizontal
set output 'experiments/results/resident/per-iteration-local-mixed-lan.png'
set title 'Per iteration on local-mixed-lan, relative to the desktop alone (median, min..max)'
set ylabel 'time / desktop alone'
set yrange [0:*]
set datafile missing '?'
set style data histograms
set style histogram errorbars gap 1 lw 1
set style fill solid 0.6 border -1
set boxwidth 0.9
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb '#606060'
plot 'experiments/results/resident/per-iteration-local-mixed-lan.dat' using 2:3:4:xtic(1) lc rgb '#4472c4' title 'cluster', 'experiments/results/resident/per-iteration-local-mixed-lan.dat' using 5:6:7 lc rgb '#a5a5a5' title 'desktop-alone', 'experiments/results/resident/per-iteration-local-mixed-lan.dat' using 8:9:10 lc rgb '#ed7d31' title 'even', 'experiments/results/resident/per-iteration-local-mixed-lan.dat' using 11:12:13 lc rgb '#70ad47' title 'blas-1core'
